package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/sqlite"
)

// repairCmd salvages a damaged log: it copies every row it can read into a
// fresh log, verifying each event again (they are all signed, so nothing
// altered gets through), reports what it could not read, optionally
// fetches the rest from peers, and puts the new log in the old one's place
// (keeping the damaged file beside it) unless --out is given.
type repairCmd struct {
	out      io.Writer
	progress *progress
	db, dst  string
	peers    listFlag
	now      func() time.Time
}

func (c *repairCmd) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("repair", flag.ContinueOnError)
	fs.StringVar(&c.db, "db", "./anp2.db", "the damaged SQLite log")
	fs.StringVar(&c.dst, "out", "", "write the repaired log here and leave --db alone (default: replace --db, keeping it as <db>.damaged-<time>)")
	fs.Var(&c.peers, "peer", "relay URL to fetch what could not be read from (repeatable)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("usage: anp2 repair [--db FILE] [--out NEWFILE] [--peer URL]")
	}
	c.now = time.Now
	return nil
}

// repairStats counts what a repair did.
type repairStats struct {
	copied, rejected, fetched int
}

func (c *repairCmd) Run(ctx context.Context) error {
	if _, err := os.Stat(c.db); err != nil {
		return err
	}
	// No relay may write the damaged log while it is read and replaced.
	lock, err := sqlite.Lock(c.db)
	if err != nil {
		return err
	}
	defer lock.Close()
	replace := c.dst == ""
	if replace {
		c.dst = fmt.Sprintf("%s.repair-%d", c.db, os.Getpid())
	}
	if _, err := os.Stat(c.dst); err == nil {
		return fmt.Errorf("%s exists: repair writes a fresh log", c.dst)
	}
	start := c.now()
	st, err := sqlite.Open(c.dst, nil)
	if err != nil {
		return err
	}
	var stats repairStats
	rep, err := c.salvage(ctx, st, &stats)
	for _, peer := range c.peers {
		if err != nil {
			break
		}
		err = c.fetch(ctx, st, peer, &stats)
	}
	stillLost := 0
	for _, id := range rep.LostIDs {
		if _, found, lerr := st.Lookup(ctx, id); lerr == nil && !found {
			stillLost++
		}
	}
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	c.report(rep, stats, stillLost, time.Since(start))
	if err != nil {
		return err
	}
	os.Remove(sqlite.LockPath(c.dst))
	if !replace {
		fmt.Fprintf(c.out, "repaired log written to %s; %s is unchanged\n", c.dst, c.db)
		return nil
	}
	kept, err := swapLog(c.db, c.dst, c.now())
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%s replaced by the repaired log; the damaged one is kept as %s\n", c.db, kept)
	return nil
}

// salvage copies every readable, valid event of c.db into st in log order,
// keeping the bytes each arrived as and when.
func (c *repairCmd) salvage(ctx context.Context, st *sqlite.Store, stats *repairStats) (sqlite.SalvageReport, error) {
	c.progress.step("read", "reading %s", c.db)
	return sqlite.Salvage(ctx, c.db, func(rows []sqlite.Row) error {
		recs := make([]sqlite.Record, 0, len(rows))
		for _, r := range rows {
			recs = append(recs, sqlite.Record{Body: r.Body, Raw: r.Raw, RawType: r.RawType, ReceivedAt: r.ReceivedAt})
		}
		n, err := appendVerified(ctx, st, recs)
		stats.copied += n
		stats.rejected += len(recs) - n
		return err
	}, func(seq, through int64) {
		c.progress.update("read seq %d/%d: copied %d, rejected %d", min(seq, through), through, stats.copied, stats.rejected)
	})
}

// fetch appends every event of peer's log that st lacks.
func (c *repairCmd) fetch(ctx context.Context, st *sqlite.Store, peer string, stats *repairStats) error {
	cl := client.New(peer)
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	cl.Key = key // any key reads hidden events too
	var batch []sqlite.Record
	flush := func() error {
		n, err := appendVerified(ctx, st, batch)
		stats.fetched += n
		batch = batch[:0]
		c.progress.update("fetch %s: %d events added", peer, stats.fetched)
		return err
	}
	now := c.now().Unix()
	_, err = cl.Export(ctx, 0, func(_ int64, raw json.RawMessage) error {
		batch = append(batch, sqlite.Record{Body: append([]byte(nil), raw...), ReceivedAt: now})
		if len(batch) < 2048 {
			return nil
		}
		return flush()
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("fetch from %s: %w", peer, err)
	}
	return nil
}

// appendVerified decodes each record's Body, keeps those whose id and
// signature verify, appends them, and returns how many were newly stored.
func appendVerified(ctx context.Context, st *sqlite.Store, recs []sqlite.Record) (int, error) {
	ok := make([]bool, len(recs))
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(recs); i += workers {
				e, err := protocol.DecodeJSON(recs[i].Body)
				if err == nil {
					err = e.CheckID()
				}
				if err == nil {
					err = e.CheckSig()
				}
				if err == nil {
					recs[i].Event, recs[i].Body = e, protocol.AppendJSON(nil, e)
					ok[i] = true
				}
			}
		}()
	}
	wg.Wait()
	good := recs[:0]
	for i, r := range recs {
		if ok[i] {
			good = append(good, r)
		}
	}
	if len(good) == 0 {
		return 0, nil
	}
	res, err := st.AppendBatch(ctx, good)
	n := 0
	for _, r := range res {
		if !r.Duplicate {
			n++
		}
	}
	return n, err
}

// report prints what the repair read, lost and fetched.
func (c *repairCmd) report(rep sqlite.SalvageReport, stats repairStats, stillLost int, took time.Duration) {
	c.progress.done()
	fmt.Fprintf(c.out, "read %d rows through seq %d in %s: %d copied, %d failed verification\n",
		rep.Rows, rep.Through, took.Round(time.Millisecond), stats.copied, stats.rejected)
	if n := rep.LostRows(); n > 0 {
		fmt.Fprintf(c.out, "could not read %d seqs in %d ranges:\n", n, len(rep.Lost))
		for i, l := range rep.Lost {
			if i == 20 {
				fmt.Fprintf(c.out, "  … %d more ranges\n", len(rep.Lost)-i)
				break
			}
			fmt.Fprintf(c.out, "  seq %d-%d: %s\n", l.From, l.To, l.Err)
		}
		fmt.Fprintf(c.out, "%d of them are named by an index (their ids are known)\n", len(rep.LostIDs))
	} else {
		fmt.Fprintln(c.out, "every row was readable")
	}
	if len(rep.Integrity) > 0 {
		fmt.Fprintf(c.out, "integrity_check found %d problems (first %d):\n", len(rep.Integrity), min(5, len(rep.Integrity)))
		for _, l := range rep.Integrity[:min(5, len(rep.Integrity))] {
			fmt.Fprintf(c.out, "  %s\n", l)
		}
	}
	if len(c.peers) > 0 {
		fmt.Fprintf(c.out, "fetched %d events from %d peers; %d events named as lost are still missing\n", stats.fetched, len(c.peers), stillLost)
	} else if len(rep.LostIDs) > 0 {
		fmt.Fprintln(c.out, "run again with --peer URL to fetch the lost events from a relay that has them")
	}
}

// swapLog puts the repaired log at path in place of the damaged one in a
// single rename, keeping the damaged file (and its -wal and -shm, which
// must not meet the new log) as <path>.damaged-<time>. It returns that name.
func swapLog(path, repaired string, now time.Time) (string, error) {
	if _, err := os.Stat(repaired + "-wal"); err == nil {
		return "", fmt.Errorf("%s-wal remains after closing the repaired log", repaired)
	}
	kept := path + ".damaged-" + now.UTC().Format("20060102T150405Z")
	if err := os.Link(path, kept); err != nil {
		if err := os.Rename(path, kept); err != nil {
			return "", fmt.Errorf("keep damaged log: %w", err)
		}
	}
	for _, sfx := range []string{"-wal", "-shm"} {
		if err := os.Rename(path+sfx, kept+sfx); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("keep damaged log: %w", err)
		}
	}
	// The damaged log's index and items files go with it; the repaired
	// log's (written as it was filled) come with it, or none.
	for _, companion := range []func(string) string{sqlite.IndexPath, sqlite.ItemsPath} {
		if err := os.Rename(companion(path), companion(kept)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("keep damaged log: %w", err)
		}
	}
	if err := os.Rename(repaired, path); err != nil {
		return "", fmt.Errorf("replace log: %w", err)
	}
	for _, companion := range []func(string) string{sqlite.IndexPath, sqlite.ItemsPath} {
		if err := os.Rename(companion(repaired), companion(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("replace log: %w", err)
		}
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return kept, nil
}
