package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// migrateCmd copies an event log from one backend to another (SQLite to
// PostgreSQL or back, or between two of either) in log order, keeping
// every stored field, so the copy has the same seqs and the same state.
type migrateCmd struct {
	out      io.Writer
	progress *progress
	from, to string
}

func (c *migrateCmd) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.StringVar(&c.from, "from", "", "the log to copy: a SQLite file (or sqlite:PATH) or a postgres:// URL")
	fs.StringVar(&c.to, "to", "", "the empty log to copy into: a SQLite file (or sqlite:PATH) or a postgres:// URL")
	if err := parse(fs, args); err != nil {
		return err
	}
	if c.from == "" || c.to == "" || fs.NArg() != 0 {
		return fmt.Errorf("usage: anp2 migrate --from DB --to DB (each a SQLite file or a postgres:// URL)")
	}
	if c.from == c.to {
		return fmt.Errorf("--from and --to are the same log")
	}
	return nil
}

// migrateBatch is how many events go to the destination per LoadBatch.
const migrateBatch = 5000

func (c *migrateCmd) Run(ctx context.Context) error {
	dst, err := openLog(ctx, c.to, nil)
	if err != nil {
		return fmt.Errorf("open --to: %w", err)
	}
	defer dst.Close()
	if st, err := dst.Stats(ctx); err != nil {
		return err
	} else if st.Events > 0 {
		return fmt.Errorf("--to %s already holds %d events: migrate copies into an empty log", dbLabel(c.to), st.Events)
	}
	start := time.Now()
	n, err := c.copy(ctx, dst)
	c.progress.done()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "migrated %d events from %s to %s in %s (%.0f events/s)\n", n, dbLabel(c.from), dbLabel(c.to),
		time.Since(start).Round(time.Millisecond), float64(n)/time.Since(start).Seconds())
	return nil
}

// copy bulk-loads every event of c.from into dst, in log order, and
// checks that each lands at its own seq. A SQLite source is read without
// its writer lock: a relay may be serving from it meanwhile (what it
// appends after the read passes the end is not copied).
func (c *migrateCmd) copy(ctx context.Context, dst eventlog.Log) (int64, error) {
	if err := dst.BeginBulk(ctx); err != nil {
		return 0, err
	}
	var done int64
	start := time.Now()
	batch := make([]eventlog.Record, 0, migrateBatch)
	var seqs []int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := dst.LoadBatch(ctx, batch)
		if err != nil {
			return fmt.Errorf("load into --to: %w", err)
		}
		for i, r := range res {
			if r.Duplicate || r.Seq != seqs[i] {
				return fmt.Errorf("event %s landed at seq %d (duplicate %v), not at its source seq %d", batch[i].Event.ID, r.Seq, r.Duplicate, seqs[i])
			}
		}
		done += int64(len(batch))
		batch, seqs = batch[:0], seqs[:0]
		c.progress.update("migrate: %d events (%.0f/s)", done, float64(done)/time.Since(start).Seconds())
		return nil
	}
	err := readStored(ctx, c.from, func(st *eventlog.Stored) error {
		if id, _, ok := eventlog.WithheldOf(st.Body); ok {
			// A withheld event (SPEC §21.8): its tombstone, at its seq.
			ta, ok := dst.(tombstoneAppender)
			if !ok {
				return fmt.Errorf("seq %d holds the withheld event %s, and --to cannot store a tombstone", st.Seq, id)
			}
			if err := flush(); err != nil {
				return err
			}
			seq, err := ta.AppendTombstone(ctx, st.Body, st.ReceivedAt)
			if err != nil {
				return err
			}
			if seq != st.Seq {
				return fmt.Errorf("the tombstone of %s landed at seq %d, not at its source seq %d", id, seq, st.Seq)
			}
			done++
			return ctx.Err()
		}
		e, err := protocol.DecodeJSON(st.Body)
		if err != nil {
			return fmt.Errorf("decode the event at seq %d: %w", st.Seq, err)
		}
		batch = append(batch, eventlog.Record{Event: e, Body: st.Body, Raw: st.Raw, RawType: st.RawType, ReceivedAt: st.ReceivedAt})
		seqs = append(seqs, st.Seq)
		if len(batch) == migrateBatch {
			return flush()
		}
		return ctx.Err()
	})
	if err == nil {
		err = flush()
	}
	endErr := dst.EndBulk(func(phase string) { c.progress.step(phase, "migrate: %s", phase) })
	if err != nil {
		return done, err
	}
	return done, endErr
}

// tombstoneAppender is a log that can store a withheld event's tombstone
// at its next seq (both backends).
type tombstoneAppender interface {
	AppendTombstone(ctx context.Context, tombstone []byte, receivedAt int64) (int64, error)
}
