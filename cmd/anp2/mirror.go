package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/federation"
	"github.com/anp2net/relay/relay/governance"
)

// mirrorCmd reconciles a local log with peer relays once: it fetches what
// the log lacks and pushes what each peer lacks.
type mirrorCmd struct {
	out      io.Writer
	progress *progress
	db, key  string
	peers    listFlag
}

func (c *mirrorCmd) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("mirror", flag.ContinueOnError)
	fs.StringVar(&c.db, "db", "./anp2.db", "the local log: a SQLite file or a postgres:// URL")
	fs.StringVar(&c.key, "relay-key", "", "the local relay's key file (default <db>.relay-key)")
	fs.Var(&c.peers, "peer", "peer relay URL (repeatable)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if len(c.peers) == 0 {
		return fmt.Errorf("usage: anp2 mirror --peer URL [--peer URL…] [--db FILE]")
	}
	return nil
}

func (c *mirrorCmd) Run(ctx context.Context) error {
	st, err := openLog(ctx, c.db, nil)
	if err != nil {
		return damaged(c.db, err)
	}
	defer st.Close()
	cfg := relay.DefaultConfig()
	if c.key == "" {
		c.key = relayKeyDefault(c.db)
	}
	if cfg.RelayKey, err = loadOrCreateKey(c.key); err != nil {
		return err
	}
	// A one-shot mirror serves nothing: governance without keys suffices.
	mods, err := modules(federation.DefaultOptions(), governance.Options{}, deliveryQueue(c.db, c.key))
	if err != nil {
		return err
	}
	// The transparency log's tree is the serving relay's: it catches up
	// with what this run appends when it next starts (SPEC §21.1).
	cfg.Modules = slices.DeleteFunc(slices.Clone(mods.all), func(m relay.Module) bool { return m == relay.Module(mods.tlog) })
	if _, err := relay.New(cfg, st); err != nil {
		return err
	}
	srv := mods.federation
	for _, peer := range c.peers {
		start := time.Now()
		res, err := srv.MirrorOnce(ctx, peer, func(r federation.MirrorResult) {
			c.progress.step(r.Phase, "%s: need %d (fetched %d), have %d (pushed %d) %s", peer, r.Need, r.Fetched, r.Have, r.Pushed, r.Phase)
		})
		c.progress.done()
		b, _ := json.Marshal(res)
		fmt.Fprintf(c.out, "%s in %s\n", b, time.Since(start).Round(time.Millisecond))
		if err != nil {
			return err
		}
	}
	return nil
}
