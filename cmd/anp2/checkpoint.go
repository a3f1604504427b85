package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/branches"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/relay/state"
)

// checkpointCmd prints the kind 12 content (SPEC §17.1) of a log at a
// time, for the high-trust agents to cosign (`anp2 cosign --kind 12`) and
// publish (`anp2 publish --kind 12 --cosign ...`).
type checkpointCmd struct {
	out      io.Writer
	at       int64
	id       string
	treasury string
	source   string
	gov      govFlags
}

func (c *checkpointCmd) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("checkpoint", flag.ContinueOnError)
	fs.Int64Var(&c.at, "at", 0, "the checkpoint's as_of, unix seconds (default now, to the minute)")
	fs.StringVar(&c.id, "id", "", "checkpoint_id (default cp-<UTC time of as_of>)")
	fs.StringVar(&c.treasury, "treasury", "", "credit treasury agent_id for a local log (default the public network's)")
	c.gov.register(fs) // a local log is folded under the relay's governance keys
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: anp2 checkpoint [--at UNIX] [--id ID] SOURCE (a relay URL or a database file)")
	}
	c.source = fs.Arg(0)
	return nil
}

func (c *checkpointCmd) Run(ctx context.Context) error {
	if c.at == 0 {
		c.at = time.Now().Unix()
		c.at -= c.at % 60
	}
	if c.id == "" {
		c.id = branches.DefaultCheckpointID(c.at)
	}
	if strings.HasPrefix(c.source, "http://") || strings.HasPrefix(c.source, "https://") {
		var cp branches.Checkpoint
		q := url.Values{"as_of": {strconv.FormatInt(c.at, 10)}, "checkpoint_id": {c.id}}
		if err := client.New(c.source).GetJSON(ctx, "/checkpoints/draft", q, &cp); err != nil {
			return fmt.Errorf("GET %s/checkpoints/draft: %w", c.source, err)
		}
		b, _ := json.Marshal(cp)
		fmt.Fprintln(c.out, string(b))
		return nil
	}
	if !isSQLite(c.source) {
		return fmt.Errorf("%s: not a relay URL or a database file", c.source)
	}
	// Read without the writer lock: the relay may be running on it.
	each := func(fn func(*protocol.Event) error) error {
		return sqlite.ReadLog(ctx, c.source, func(r sqlite.Row) error {
			e, err := protocol.DecodeJSON(r.Body)
			if err != nil {
				return fmt.Errorf("event at seq %d: %w", r.Seq, err)
			}
			return fn(e)
		})
	}
	gov, err := c.gov.options()
	if err != nil {
		return err
	}
	fl, err := folds(gov)
	if err != nil {
		return err
	}
	snap, err := branches.Prefix(c.at, state.Options{Treasury: c.treasury, Folds: fl}, each)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.out, snap.Content(c.id))
	return nil
}
