package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/federation"
	"github.com/anp2net/relay/relay/offline"
	"github.com/anp2net/relay/relay/state"
)

// replayCmd is the auditor's replay: it verifies a log and rebuilds every
// derived view from nothing, optionally comparing with a relay's /state.
type replayCmd struct {
	out      io.Writer
	progress *progress
	source   string
	compare  string
	tree     bool
	treeSet  bool // --tree was given
	at       int64
	treasury string
	verbose  bool
	keyPath  string
	gov      govFlags
	branch   string
	// powBypass: the log was written under serve --standing-pow-bypass.
	powBypass bool
	// redactors are the relay keys whose kind 25 redactions count
	// (--redactor, and the compared relay's GET /withheld).
	redactors listFlag
}

// errMismatch is returned when --compare finds a differing view.
var errMismatch = errors.New("state mismatch")

func (c *replayCmd) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.StringVar(&c.compare, "compare", "", "relay URL whose GET /state must equal the replay's")
	fs.BoolVar(&c.tree, "tree", false, "with --compare, also check that the replayed log hashes to the compared relay's signed transparency-log checkpoint (SPEC §21) when SOURCE is a database or file of that relay's log (a copy of another relay's log has another order); when SOURCE is the compared relay itself the check runs unless --tree=false")
	fs.Int64Var(&c.at, "at", 0, "evaluation time, unix seconds (default now)")
	fs.StringVar(&c.treasury, "treasury", "", "credit treasury agent_id (default the public network's)")
	c.gov.register(fs)
	fs.BoolVar(&c.verbose, "v", false, "print every invalid event, not just the first 20")
	fs.StringVar(&c.branch, "branch", "", "also rebuild the state of this branch's events only (SPEC §17.5) and compare it with the relay's /state?branch=")
	fs.BoolVar(&c.powBypass, "standing-pow-bypass", false, "the log comes from a relay serving with --standing-pow-bypass: keep kinds 0 and 50 that lack the mandatory PoW, which it admitted by standing (an over-claiming pow tag is still refused; SPEC §12.1)")
	fs.Var(&c.redactors, "redactor", "agent_id of a relay key whose kind 25 redactions count, as they do on the relay that wrote the log (SPEC §21.8; repeatable; with --compare the relay's own GET /withheld names them)")
	fs.StringVar(&c.keyPath, "key", "", "key file to authenticate a relay download with (default: a fresh key for this run; any key reads hidden events)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: anp2 replay [--compare URL] [--at UNIX] SOURCE (a database file or postgres:// URL, an export file, a relay URL, or - for stdin)")
	}
	c.source = fs.Arg(0)
	c.treeSet = false
	fs.Visit(func(f *flag.Flag) { c.treeSet = c.treeSet || f.Name == "tree" })
	return nil
}

func (c *replayCmd) Run(ctx context.Context) error {
	if c.at == 0 {
		c.at = time.Now().Unix()
	}
	var remote *state.Digest
	through := int64(-1)
	if c.compare != "" {
		d, err := fetchState(ctx, c.compare, c.at)
		if err != nil {
			return err
		}
		remote = &d
		keys, err := fetchRedactors(ctx, c.compare)
		if err != nil {
			return err
		}
		c.redactors = append(c.redactors, keys...)
		if sameRelay(c.compare, c.source) {
			through = d.Seq // replay exactly what that /state folded
		}
	}
	path, cleanup, err := c.openSource(ctx, through)
	if err != nil {
		return err
	}
	defer cleanup()
	// The replay allocates briskly and keeps a modest live heap (about
	// 160 MiB at a million events): collect less often.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	start := time.Now()
	gov, err := c.gov.options()
	if err != nil {
		return err
	}
	mods, err := modules(federation.DefaultOptions(), gov)
	if err != nil {
		return err
	}
	// A module's own state files (discovery's store) are temporary files,
	// removed when the replay ends.
	for _, m := range mods.all {
		if o, ok := m.(relay.StateOpener); ok {
			if err := o.OpenState(""); err != nil {
				return err
			}
			if cl, ok := o.(io.Closer); ok {
				defer cl.Close()
			}
		}
	}
	fl := relay.Folds(mods.all)
	rp := &offline.Replayer{Checker: replayChecker(c.powBypass), Now: time.Now().Unix(), Options: state.Options{Treasury: c.treasury, Folds: fl, Redactors: c.redactors},
		OnProgress: func(s offline.ReplayStats) {
			c.progress.update("replay: %d events (%.0f/s)", s.Read, float64(s.Read)/time.Since(start).Seconds())
		}}
	st, stats, err := rp.Replay(ctx, path)
	c.progress.done()
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	d := st.Digest(c.at)
	c.report(stats, d, elapsed)
	if c.branch != "" && c.branch != "all" {
		if d, err = c.replayBranch(ctx, path, fl, gov); err != nil {
			return err
		}
		if remote != nil {
			r, err := fetchBranchState(ctx, c.compare, c.branch, c.at)
			if err != nil {
				return err
			}
			remote = &r
		}
	}
	if remote == nil {
		return nil
	}
	var treeErr error
	// The relay's own log is checked unless told not to; a database or a
	// file only when asked (it may be a copy of another relay's log, in
	// another order, whose state still matches).
	ownLog := sameRelay(c.compare, c.source) && (c.tree || !c.treeSet)
	copyAsked := c.tree && (!strings.Contains(c.source, "://") || isPostgres(c.source))
	if ownLog || copyAsked {
		if treeErr = c.verifyTree(ctx, path); treeErr != nil && !errors.Is(treeErr, errTreeMismatch) {
			return treeErr
		}
	}
	if view := state.FirstDifference(d, *remote); view != "" || d.Digest != remote.Digest {
		fmt.Fprintf(c.out, "MISMATCH with %s: first differing view %q (replay %s, relay %s)\n",
			c.compare, view, d.Views[view], remote.Views[view])
		return errMismatch
	}
	fmt.Fprintf(c.out, "match: %s serves the same state (seq %d, %d events)\n", c.compare, remote.Seq, remote.Events)
	return treeErr
}

func (c *replayCmd) report(s offline.ReplayStats, d state.Digest, elapsed time.Duration) {
	fmt.Fprintf(c.out, "read %d lines: %d valid, %d duplicate, %d invalid; folded %d in %s (%.0f events/s)\n",
		s.Read, s.Valid, s.Duplicate, s.Read-s.Valid-s.Duplicate, s.Valid, elapsed.Round(time.Millisecond),
		float64(s.Read)/elapsed.Seconds())
	kinds := make([]int64, 0, len(s.Kinds))
	for k := range s.Kinds {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	for _, k := range kinds {
		fmt.Fprintf(c.out, "  kind %-6d %d\n", k, s.Kinds[k])
	}
	codes := make([]string, 0, len(s.Rejected))
	for k := range s.Rejected {
		codes = append(codes, k)
	}
	sort.Strings(codes)
	for _, k := range codes {
		fmt.Fprintf(c.out, "  invalid %-30s %d\n", k, s.Rejected[k])
	}
	for i, inv := range s.Invalid {
		if i == 20 && !c.verbose {
			fmt.Fprintf(c.out, "  … %d more invalid events (-v lists them)\n", len(s.Invalid)-20)
			break
		}
		fmt.Fprintf(c.out, "  line %d %s %s: %s\n", inv.Line, inv.ID, inv.Code, inv.Err)
	}
	b, _ := json.MarshalIndent(d, "", "  ")
	fmt.Fprintf(c.out, "state %s\n", b)
}

// openSource returns the log as a JSON-lines file the replayer can read
// with random access (a relay's export, stdin and a database are spooled to
// a temporary file) and a cleanup.
func (c *replayCmd) openSource(ctx context.Context, through int64) (string, func(), error) {
	var fill func(io.Writer) error
	switch {
	case strings.HasPrefix(c.source, "http://") || strings.HasPrefix(c.source, "https://"):
		fill = func(w io.Writer) error { return c.download(ctx, w, through) }
	case c.source == "-":
		fill = func(w io.Writer) error { _, err := io.Copy(w, os.Stdin); return err }
	case isSQLite(c.source) || isPostgres(c.source):
		fill = func(w io.Writer) error { return c.dumpStore(ctx, w) }
	default:
		return c.source, func() {}, nil
	}
	path, err := c.spool(ctx, fill)
	if err != nil {
		return "", func() {}, err
	}
	return path, func() { os.Remove(path) }, nil
}

// download streams the relay's /export (through seq through when ≥ 0).
func (c *replayCmd) download(ctx context.Context, w io.Writer, through int64) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	n := 0
	cl := client.New(c.source)
	// Hidden events count in derived state (D6) but are exported only to
	// authenticated readers: the auditor always authenticates.
	if c.keyPath != "" {
		k, err := loadKey(c.keyPath)
		if err != nil {
			return err
		}
		cl.Key = k
	} else {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		cl.Key = k
	}
	_, err := cl.ExportThrough(ctx, 0, through, func(_ int64, raw json.RawMessage) error {
		n++
		if n%4096 == 0 {
			c.progress.update("download: %d events", n)
		}
		bw.Write(raw)
		return bw.WriteByte('\n')
	})
	if err != nil {
		return fmt.Errorf("download %s: %w", c.source, err)
	}
	return bw.Flush()
}

// spool writes a stream to a temporary file so it can be read twice.
func (c *replayCmd) spool(ctx context.Context, fill func(io.Writer) error) (string, error) {
	f, err := os.CreateTemp("", "anp2-replay-*.jsonl")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := fill(f); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), ctx.Err()
}

// dumpStore writes a database's log as JSON lines. It reads without the
// writer lock, so the log of a running relay can be audited.
func (c *replayCmd) dumpStore(ctx context.Context, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	err := readStored(ctx, c.source, func(r *eventlog.Stored) error {
		if r.Seq%4096 == 0 {
			c.progress.update("read database: seq %d", r.Seq)
		}
		bw.Write(r.Body)
		return bw.WriteByte('\n')
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

func isSQLite(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 16)
	n, _ := io.ReadFull(f, head)
	return bytes.Equal(head[:n], []byte("SQLite format 3\x00"))
}

// fetchState reads base's GET /state?at=.
// fetchBranchState reads a relay's GET /state?branch=&at=.
func fetchBranchState(ctx context.Context, base, branch string, at int64) (state.Digest, error) {
	var d state.Digest
	q := url.Values{"at": {strconv.FormatInt(at, 10)}, "branch": {branch}}
	if err := client.New(base).GetJSON(ctx, "/state", q, &d); err != nil {
		return d, fmt.Errorf("GET %s/state?branch=%s: %w", base, branch, err)
	}
	return d, nil
}

func fetchState(ctx context.Context, base string, at int64) (state.Digest, error) {
	var d state.Digest
	err := client.New(base).GetJSON(ctx, "/state", url.Values{"at": {strconv.FormatInt(at, 10)}}, &d)
	if err != nil {
		return d, fmt.Errorf("GET %s/state: %w", base, err)
	}
	return d, nil
}

func sameRelay(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}

// replayChecker is the default checker; for the log of a relay serving
// with the standing-based PoW bypass, without the mandatory PoW, which
// that relay judged by a standing no replay can sample again (SPEC §12.1).
func replayChecker(powBypass bool) protocol.Checker {
	c := protocol.DefaultChecker()
	if powBypass {
		c.PoW.Kinds = nil
	}
	return c
}

// fetchRedactors reads the relay keys whose redactions count on base
// (GET /withheld, SPEC §21.8); a relay without the route has none.
func fetchRedactors(ctx context.Context, base string) ([]string, error) {
	var a struct {
		Redactors []string `json:"redactors"`
	}
	err := client.New(base).GetJSON(ctx, "/withheld", nil, &a)
	var se *client.Error
	if errors.As(err, &se) && se.Status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("GET %s/withheld: %w", base, err)
	}
	for _, k := range a.Redactors {
		if !protocol.IsHex64(k) {
			return nil, fmt.Errorf("GET %s/withheld: redactor %q is not an agent_id", base, k)
		}
	}
	return a.Redactors, nil
}
