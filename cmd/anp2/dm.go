package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
)

// dmCmd is `anp2 dm send` and `anp2 dm read`: private messages (kind 3,
// §4.4), sealed and opened on this side; the relay only carries them.
type dmCmd struct {
	out, errOut io.Writer
	sub         string
	relayURL    string
	keyPath     string
	to, text    string
	with        string
	limit       int
	follow      bool
	interval    time.Duration
	asJSON      bool
	createdAt   int64
}

const dmUsage = `usage:
  anp2 dm send --key FILE --to AGENT_ID [--relay URL] (--text TEXT | TEXT...)
  anp2 dm read --key FILE [--relay URL] [--with AGENT_ID] [--limit N] [--follow] [--json]`

func (c *dmCmd) ParseFlags(args []string) error {
	if len(args) == 0 || (args[0] != "send" && args[0] != "read") {
		return errors.New(dmUsage)
	}
	c.sub = args[0]
	fs := flag.NewFlagSet("dm "+c.sub, flag.ContinueOnError)
	fs.StringVar(&c.relayURL, "relay", "http://127.0.0.1:8080", "relay base URL")
	fs.StringVar(&c.keyPath, "key", "anp2.key", "key file (from anp2 keygen)")
	if c.sub == "send" {
		fs.StringVar(&c.to, "to", "", "recipient agent_id")
		fs.StringVar(&c.text, "text", "", "message text (or give it as arguments)")
		fs.Int64Var(&c.createdAt, "created-at", 0, "created_at (default now)")
	} else {
		fs.StringVar(&c.with, "with", "", "only the conversation with this agent_id")
		fs.IntVar(&c.limit, "limit", 100, "how many messages each way (1..1000)")
		fs.BoolVar(&c.follow, "follow", false, "keep polling and print new messages as they arrive")
		fs.DurationVar(&c.interval, "interval", 2*time.Second, "polling interval for --follow")
		fs.BoolVar(&c.asJSON, "json", false, "print one JSON object per message")
	}
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if c.sub == "send" {
		if c.text == "" {
			c.text = strings.Join(fs.Args(), " ")
		}
		if !protocol.IsHex64(c.to) {
			return errors.New("dm send: --to must be a 64-hex agent_id")
		}
		if c.text == "" {
			return errors.New("dm send: no message text")
		}
	}
	if c.with != "" && !protocol.IsHex64(c.with) {
		return errors.New("dm read: --with must be a 64-hex agent_id")
	}
	return nil
}

func (c *dmCmd) Run(ctx context.Context) error {
	if c.sub == "send" {
		return c.send(ctx)
	}
	return c.read(ctx)
}

// send seals, signs and publishes one message.
func (c *dmCmd) send(ctx context.Context) error {
	key, err := loadKey(c.keyPath)
	if err != nil {
		return err
	}
	e, err := client.SealDM(key, c.to, []byte(c.text), nil)
	if err != nil {
		return fmt.Errorf("dm send: %w", err)
	}
	e.CreatedAt = c.createdAt
	if e.CreatedAt == 0 {
		e.CreatedAt = time.Now().Unix()
	}
	e.Sign(key)
	res, err := client.New(c.relayURL).Publish(ctx, e, false)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(res)
	fmt.Fprintln(c.out, string(b))
	return nil
}

// read prints the inbox and outbox, newest first, then (with --follow)
// new messages as they arrive, oldest first.
func (c *dmCmd) read(ctx context.Context) error {
	key, err := loadKey(c.keyPath)
	if err != nil {
		return err
	}
	r := &dmReader{cl: client.New(c.relayURL), names: map[string]string{}, seen: map[string]bool{}}
	r.cl.Key = key
	msgs, err := r.fetch(ctx, c.query(0))
	if err != nil {
		return err
	}
	c.print(ctx, r, msgs)
	for c.follow {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.interval):
		}
		msgs, err := r.fetch(ctx, c.query(r.newest))
		if err != nil {
			fmt.Fprintln(c.errOut, "anp2 dm read:", err)
			continue
		}
		for i := len(msgs) - 1; i >= 0; i-- {
			c.print(ctx, r, msgs[i:i+1])
		}
	}
	return nil
}

func (c *dmCmd) query(since int64) url.Values {
	q := url.Values{"limit": {strconv.Itoa(c.limit)}}
	if since > 0 {
		q.Set("since", strconv.FormatInt(since, 10))
	}
	return q
}

// print writes msgs (those with --with's peer), and how many messages
// could not be opened since the last print.
func (c *dmCmd) print(ctx context.Context, r *dmReader, msgs []client.Message) {
	for _, m := range msgs {
		if c.with != "" && m.Peer != c.with {
			continue
		}
		name := r.name(ctx, m.Peer)
		if c.asJSON {
			b, _ := json.Marshal(map[string]any{"id": m.Event.ID, "created_at": m.Event.CreatedAt,
				"from": m.Event.AgentID, "to": m.Event.TagValue("p"), "peer": m.Peer, "peer_name": name,
				"outgoing": m.Outgoing, "text": string(m.Text)})
			fmt.Fprintln(c.out, string(b))
			continue
		}
		arrow := "<-"
		if m.Outgoing {
			arrow = "->"
		}
		who := m.Peer[:12]
		if name != "" {
			who = name + " (" + who + ")"
		}
		at := time.Unix(m.Event.CreatedAt, 0).UTC().Format(time.RFC3339)
		fmt.Fprintf(c.out, "%s %s %s: %s\n", at, arrow, who, m.Text)
	}
	if r.dropped > 0 {
		fmt.Fprintf(c.errOut, "%d message(s) could not be opened and were dropped\n", r.dropped)
		r.dropped = 0
	}
}

// dmReader fetches and opens one agent's messages, remembering what it
// has shown and the peers' names.
type dmReader struct {
	cl      *client.Client
	names   map[string]string
	seen    map[string]bool
	newest  int64
	dropped int
}

// fetch returns the messages of the inbox and the outbox not yet
// returned, newest first.
func (r *dmReader) fetch(ctx context.Context, q url.Values) ([]client.Message, error) {
	me := protocol.AgentIDOf(r.cl.Key)
	in, err := r.cl.Inbox(ctx, me, q)
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	out, err := r.cl.Outbox(ctx, me, q)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	var fresh []*protocol.Event
	for _, e := range append(in, out...) {
		if !r.seen[e.ID] {
			r.seen[e.ID] = true
			fresh = append(fresh, e)
			r.newest = max(r.newest, e.CreatedAt)
		}
	}
	msgs, dropped := client.OpenAll(r.cl.Key, fresh)
	r.dropped += dropped
	return msgs, nil
}

// name returns the profile name of id ("" when it has none or the relay
// does not know it).
func (r *dmReader) name(ctx context.Context, id string) string {
	if n, ok := r.names[id]; ok {
		return n
	}
	var a struct {
		Name string `json:"name"`
	}
	_ = client.New(r.cl.Base).GetJSON(ctx, "/agents/"+id, nil, &a)
	r.names[id] = a.Name
	return a.Name
}
