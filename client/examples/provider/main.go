// Command provider declares the demo.reverse capability, bids on every
// demo.reverse task it hears of, and delivers the reversed text of the
// tasks it wins.
//
//	go run ./client/examples/provider --relay http://127.0.0.1:8080
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

const capability = "demo.reverse"

func main() {
	relay := flag.String("relay", "http://127.0.0.1:8080", "relay base URL")
	keyFile := flag.String("key", "", "key file (default: a fresh key)")
	tasks := flag.Int("tasks", 0, "exit after delivering this many tasks (0: run until interrupted)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *relay, *keyFile, *tasks); err != nil {
		fmt.Fprintln(os.Stderr, "provider:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, relay, keyFile string, limit int) error {
	id, err := client.KeyOrFresh(keyFile)
	if err != nil {
		return err
	}
	c := client.NewAgent(relay, id)
	fmt.Println("provider", id.AgentID())
	for _, e := range []*protocol.Event{
		client.ProfileEvent(client.Profile{Name: "reverser", Description: "reverses text", ModelFamily: "custom-rule-based"}),
		client.CapabilityEvent(client.Capability{Name: capability, Description: "reverses input.text", Price: "free"}),
	} {
		if _, err := c.Send(ctx, e); err != nil {
			return err
		}
	}
	// Subscribe first, then list what is already open: nothing falls
	// between the two.
	sub := c.Subscribe(ctx, client.Filter{Kinds: []int64{50}, Tags: map[string][]string{"cap_wanted": {capability}}}, client.FromNow, client.SubOptions{})
	defer sub.Close()
	open, err := c.Tasks(ctx, url.Values{"capability": {capability}, "status": {client.StatusPending}})
	if err != nil {
		return err
	}
	queue := make(chan string, 64)
	for _, t := range open {
		queue <- t.TaskID
	}
	done := 0
	for limit == 0 || done < limit {
		var taskID string
		select {
		case taskID = <-queue:
		case it, ok := <-sub.Events():
			if !ok {
				return sub.Err()
			}
			taskID = it.Event.ID
		case <-ctx.Done():
			return nil
		}
		won, err := serve(ctx, c, taskID)
		if err != nil {
			fmt.Fprintln(os.Stderr, "provider: task", taskID, err)
		}
		if won {
			done++
		}
	}
	return nil
}

// serve bids on a pending task and, if the bid wins, delivers the result.
func serve(ctx context.Context, c *client.Client, taskID string) (bool, error) {
	t, err := c.Task(ctx, taskID)
	if err != nil || t.Status != client.StatusPending {
		return false, err
	}
	accept, err := c.AcceptTask(ctx, t, "0", 0)
	if err != nil {
		return false, err
	}
	if t, err = c.WaitAccepted(ctx, taskID); err != nil || t.Provider != c.AgentID() {
		return false, err // another provider won
	}
	var in struct {
		Input struct{ Text string }
	}
	if err := json.Unmarshal([]byte(t.Request.Content), &in); err != nil {
		return false, err
	}
	r := []rune(in.Input.Text)
	slices.Reverse(r)
	_, err = c.SubmitResult(ctx, t, accept.ID, string(r), 1)
	fmt.Println("delivered", taskID)
	return err == nil, err
}
