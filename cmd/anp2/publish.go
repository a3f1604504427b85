package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
)

type publishCmd struct {
	out       io.Writer
	relayURL  string
	keyPath   string
	kind      int64
	content   string
	tags      listFlag
	cosigns   listFlag
	cbor      bool
	pow       int
	createdAt int64
	dryRun    bool
}

func (c *publishCmd) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	fs.StringVar(&c.relayURL, "relay", "http://127.0.0.1:8080", "relay base URL")
	fs.StringVar(&c.keyPath, "key", "anp2.key", "key file (from anp2 keygen)")
	fs.Int64Var(&c.kind, "kind", 1, "event kind")
	fs.StringVar(&c.content, "content", "", "event content")
	fs.Var(&c.tags, "tag", "tag as name,value,... (repeatable)")
	fs.Var(&c.cosigns, "cosign", "file with a cosign tag from 'anp2 cosign' (repeatable)")
	fs.BoolVar(&c.cbor, "cbor", false, "send as application/anp+cbor")
	fs.IntVar(&c.pow, "pow", -1, "proof-of-work bits to mine (default: 12 for kinds 0 and 50, else none)")
	fs.Int64Var(&c.createdAt, "created-at", 0, "created_at (default now)")
	fs.BoolVar(&c.dryRun, "dry-run", false, "check with POST /events/dry-run instead of publishing")
	return parse(fs, args)
}

func (c *publishCmd) Run(ctx context.Context) error {
	key, err := loadKey(c.keyPath)
	if err != nil {
		return err
	}
	e := &protocol.Event{Kind: c.kind, Content: c.content, CreatedAt: c.createdAt, Tags: [][]string{}, AgentID: protocol.AgentIDOf(key)}
	if e.CreatedAt == 0 {
		e.CreatedAt = time.Now().Unix()
	}
	for _, t := range c.tags {
		e.Tags = append(e.Tags, strings.Split(t, ","))
	}
	cosigns, err := readCosigns(c.cosigns)
	if err != nil {
		return err
	}
	e.Tags = append(e.Tags, cosigns...)
	bits := c.pow
	if bits < 0 && protocol.DefaultPoWPolicy().Kinds[c.kind] {
		bits = protocol.DefaultPoWPolicy().MinBits
	}
	if bits > 0 {
		if err := protocol.Mine(ctx, e, bits); err != nil {
			return fmt.Errorf("mine: %w", err)
		}
	}
	e.Sign(key)
	cl := client.New(c.relayURL)
	var ans any
	if c.dryRun {
		var out json.RawMessage
		err = cl.PostRaw(ctx, "/events/dry-run", "application/json", protocol.AppendJSON(nil, e), &out)
		ans = out
	} else {
		ans, err = cl.Publish(ctx, e, c.cbor)
	}
	if err != nil {
		return err
	}
	b, _ := json.Marshal(ans)
	fmt.Fprintln(c.out, string(b))
	return nil
}
