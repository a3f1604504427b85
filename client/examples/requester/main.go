// Command requester posts a demo.reverse task, waits for a provider's
// result and a neutral verifier's verdict, pays, and exits 0 once the
// task has settled (non-zero, saying why, otherwise).
//
//	go run ./client/examples/requester --relay http://127.0.0.1:8080 --text hello
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/anp2net/relay/client"
)

func main() {
	relay := flag.String("relay", "http://127.0.0.1:8080", "relay base URL")
	keyFile := flag.String("key", "", "key file (default: a fresh key)")
	text := flag.String("text", "hello, agents", "text to reverse")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	if err := run(*relay, *keyFile, *text, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "requester:", err)
		os.Exit(1)
	}
}

func run(relay, keyFile, text string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	id, err := client.KeyOrFresh(keyFile)
	if err != nil {
		return err
	}
	c := client.NewAgent(relay, id)
	taskID, err := c.RequestTask(ctx, client.TaskRequest{Capability: "demo.reverse",
		Input: map[string]string{"text": text}, Deadline: time.Now().Add(timeout).Unix(), Reward: client.CreditReward(10)})
	if err != nil {
		return err
	}
	fmt.Println("task", taskID)
	task, err := c.WaitResult(ctx, taskID)
	if err != nil || task.ResultEvent() == nil {
		return fmt.Errorf("no result: status %v, %v", task, err)
	}
	var out struct{ Output string }
	if err := json.Unmarshal([]byte(task.ResultEvent().Content), &out); err != nil || out.Output != reverse(text) {
		return fmt.Errorf("wrong result %q: refusing to pay", out.Output)
	}
	if task, err = c.WaitVerdict(ctx, taskID); err != nil || task.Consensus.Verdict != "passed" {
		return fmt.Errorf("verification: %+v %v", task.Consensus, err)
	}
	if _, err := c.ReleasePayment(ctx, task, "anp2_credit", "10", "credit"); err != nil {
		return err
	}
	if task, err = c.WaitSettled(ctx, taskID); err != nil || task.Status != client.StatusPaid {
		return fmt.Errorf("not settled: %v %v", task.Status, err)
	}
	fmt.Printf("settled task=%s status=%s provider=%s\n", taskID, task.Status, task.Provider)
	return nil
}

func reverse(s string) string { r := []rune(s); slices.Reverse(r); return string(r) }
