// Command verifier checks the results of demo.reverse tasks it is neither
// requester nor provider of, and publishes its verdict: a neutral
// verifier's passed verdict is what moves credit (SPEC §5.4).
//
//	go run ./client/examples/verifier --relay http://127.0.0.1:8080
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"slices"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
)

func main() {
	relay := flag.String("relay", "http://127.0.0.1:8080", "relay base URL")
	keyFile := flag.String("key", "", "key file (default: a fresh key)")
	tasks := flag.Int("tasks", 0, "exit after judging this many tasks (0: run until interrupted)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *relay, *keyFile, *tasks); err != nil {
		fmt.Fprintln(os.Stderr, "verifier:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, relay, keyFile string, limit int) error {
	id, err := client.KeyOrFresh(keyFile)
	if err != nil {
		return err
	}
	c := client.NewAgent(relay, id)
	fmt.Println("verifier", id.AgentID())
	// Subscribe first, then list the results already waiting.
	sub := c.Subscribe(ctx, client.Filter{Kinds: []int64{protocol.KindTaskResult}}, client.FromNow, client.SubOptions{})
	defer sub.Close()
	waiting, err := c.Tasks(ctx, url.Values{"capability": {"demo.reverse"}, "status": {client.StatusCompleted}})
	if err != nil {
		return err
	}
	queue := make(chan string, len(waiting))
	for _, t := range waiting {
		queue <- t.TaskID
	}
	for judged := 0; limit == 0 || judged < limit; {
		var taskID string
		select {
		case taskID = <-queue:
		case it, ok := <-sub.Events():
			if !ok {
				return sub.Err()
			}
			taskID = protocol.TaskRoot(it.Event)
		case <-ctx.Done():
			return nil
		}
		ok, err := judge(ctx, c, taskID)
		if err != nil {
			fmt.Fprintln(os.Stderr, "verifier:", err)
		}
		if ok {
			judged++
		}
	}
	return nil
}

// judge recomputes a demo.reverse task's output and publishes the verdict.
func judge(ctx context.Context, c *client.Client, taskID string) (bool, error) {
	t, err := c.Task(ctx, taskID)
	if err != nil || t.Capability != "demo.reverse" || t.ResultEvent() == nil ||
		t.Requester == c.AgentID() || t.Provider == c.AgentID() {
		return false, err
	}
	for _, v := range t.Verifies {
		if v.AgentID == c.AgentID() {
			return false, nil // judged already
		}
	}
	var in struct{ Input struct{ Text string } }
	var out struct{ Output string }
	json.Unmarshal([]byte(t.Request.Content), &in)
	json.Unmarshal([]byte(t.ResultEvent().Content), &out)
	r := []rune(in.Input.Text)
	slices.Reverse(r)
	verdict, score := protocol.VerdictPassed, 1.0
	if out.Output != string(r) {
		verdict, score = protocol.VerdictFailed, 0
	}
	_, err = c.VerifyResult(ctx, t, verdict, score, "recomputed the reversal")
	fmt.Println("judged", taskID, verdict)
	return err == nil, err
}
