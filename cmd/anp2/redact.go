package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/postgres"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/relay/state"
)

// redactCmd withholds a stored event's body for good (SPEC §21.8): it
// records the redaction in the log as a kind 25 signed by the relay key,
// replaces the body with a tombstone that keeps the event's transparency
// log entry, and discards the saved derived state. The log must not be
// served meanwhile.
type redactCmd struct {
	out                             io.Writer
	db, id, reason, relayKey, stDir string
	now                             func() time.Time
}

// maxRedactReason bounds --reason: it travels in an event's content.
const maxRedactReason = 1024

func (c *redactCmd) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("redact", flag.ContinueOnError)
	fs.StringVar(&c.db, "db", "./anp2.db", "the log: a SQLite file or a postgres:// URL (no relay may serve it meanwhile)")
	fs.StringVar(&c.id, "id", "", "the id of the event whose body is withheld (64 lowercase hex)")
	fs.StringVar(&c.reason, "reason", "", "why, as the redaction event and every 451 answer state it (at most 1024 bytes)")
	fs.StringVar(&c.relayKey, "relay-key", "", "the relay's own key file, which signs the redaction (default <db>.relay-key; with PostgreSQL ./anp2.relay-key)")
	fs.StringVar(&c.stDir, "state-dir", "", "the relay's saved derived state, discarded (default <db>.state beside a SQLite log, none for PostgreSQL; none: keep nothing)")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 0:
		return fmt.Errorf("usage: anp2 redact --db DB --id EVENT_ID --reason TEXT")
	case !protocol.IsHex64(c.id):
		return fmt.Errorf("--id must be an event id, 64 lowercase hex characters")
	case c.reason == "" || len(c.reason) > maxRedactReason:
		return fmt.Errorf("--reason must say why, in 1 to %d bytes", maxRedactReason)
	}
	if c.relayKey == "" {
		c.relayKey = relayKeyDefault(c.db)
	}
	if c.stDir == "" && !isPostgres(c.db) {
		c.stDir = sqlitePath(c.db) + ".state"
	}
	c.now = time.Now
	return nil
}

// redactor is a log that can withhold a body (both backends).
type redactor interface {
	Redact(ctx context.Context, id string, tombstone []byte) error
}

func (c *redactCmd) Run(ctx context.Context) error {
	key, err := loadKey(c.relayKey)
	if err != nil {
		return fmt.Errorf("the relay key signs the redaction: %w", err)
	}
	if isPostgres(c.db) {
		n, err := postgres.Serving(ctx, c.db)
		if err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%d relay processes serve %s: stop every 'anp2 serve' over this database (each holds the event in memory), run anp2 redact again, then start them", n, dbLabel(c.db))
		}
	}
	st, err := openLog(ctx, c.db, nil)
	var locked *sqlite.LockedError
	if errors.As(err, &locked) {
		return fmt.Errorf("log %s is held by a running relay (%s): stop that process (it holds the event in memory and would keep serving it), run anp2 redact again, then start it", c.db, locked.Holder)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	target, err := c.target(ctx, st)
	if err != nil {
		return err
	}
	content, _ := json.Marshal(map[string]string{"id": c.id, "reason": c.reason})
	r := &protocol.Event{CreatedAt: c.now().Unix(), Kind: protocol.KindRedaction, Content: string(content),
		Tags: [][]string{{"e", c.id}}}
	r.Sign(key)
	res, err := st.Append(ctx, eventlog.NewRecord(r, protocol.AppendJSON(nil, r), "json", c.now().Unix()))
	if err != nil {
		return fmt.Errorf("record the redaction: %w", err)
	}
	tomb := eventlog.Tombstone(c.id, eventlog.Withholding{Reason: c.reason, Redaction: r.ID, CreatedAt: target.CreatedAt})
	if err := st.(redactor).Redact(ctx, c.id, tomb); err != nil {
		return fmt.Errorf("withhold the body (the redaction is recorded: run anp2 redact again to finish): %w", err)
	}
	discarded := 0
	if c.stDir != "" && c.stDir != "none" {
		if discarded, err = state.Discard(c.stDir); err != nil {
			return err
		}
	}
	fmt.Fprintf(c.out, "withheld %s (kind %d): its body is gone, its entry stays in the tree\nredaction %s at seq %d, signed by the relay key %s\n",
		c.id, target.Kind, r.ID, res.Seq, r.AgentID)
	if discarded > 0 {
		fmt.Fprintf(c.out, "discarded %d saved derived state snapshot(s): the relay folds the whole log at its next start\n", discarded)
	}
	return nil
}

// target returns the event to withhold; an event that is not there, is
// already withheld, or whose kind records the log's own bookkeeping is an
// error. A redaction already recorded for it (a run that stopped before
// the body went) is reused by the state anyway: a second one changes
// nothing but the log's size.
func (c *redactCmd) target(ctx context.Context, st eventlog.Log) (*protocol.Event, error) {
	se, err := st.Get(ctx, c.id)
	if errors.Is(err, eventlog.ErrNotFound) {
		return nil, fmt.Errorf("event %s is not in %s", c.id, dbLabel(c.db))
	}
	if err != nil {
		return nil, err
	}
	if _, w, ok := eventlog.WithheldOf(se.Body); ok {
		return nil, fmt.Errorf("event %s is already withheld (%s, redaction %s)", c.id, w.Reason, w.Redaction)
	}
	e, err := protocol.DecodeJSON(se.Body)
	if err != nil {
		return nil, err
	}
	switch e.Kind {
	case protocol.KindRevoke, protocol.KindRedaction:
		return nil, fmt.Errorf("event %s is a kind %d, whose effect is derived state, not content: it cannot be withheld", c.id, e.Kind)
	}
	return e, nil
}
