package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/branches"
	"github.com/anp2net/relay/relay/governance"
	"github.com/anp2net/relay/relay/offline"
	"github.com/anp2net/relay/relay/state"
)

// replayBranch rebuilds the state of c.branch's events (SPEC §17.5): the
// branches fold of the full replay (among named) gives the branches at
// c.at, the lines of the members are copied to a temporary file, and that
// file is replayed (verified again) with fresh folds.
func (c *replayCmd) replayBranch(ctx context.Context, path string, named []state.NamedFold, gov governance.Options) (state.Digest, error) {
	var bf *branches.Fold
	for _, nf := range named {
		if f, ok := nf.Fold.(*branches.Fold); ok {
			bf = f
		}
	}
	if bf == nil {
		return state.Digest{}, fmt.Errorf("no branches module is registered")
	}
	v := bf.Current(c.at)
	if !v.Known(c.branch) {
		return state.Digest{}, fmt.Errorf("branch %q does not exist at %d", c.branch, c.at)
	}
	members, err := c.spool(ctx, func(w io.Writer) error { return copyMembers(path, w, v, c.branch) })
	if err != nil {
		return state.Digest{}, err
	}
	defer os.Remove(members)
	fresh, err := folds(gov)
	if err != nil {
		return state.Digest{}, err
	}
	rp := &offline.Replayer{Checker: replayChecker(c.powBypass), Now: time.Now().Unix(), Options: state.Options{Treasury: c.treasury, Folds: fresh}}
	st, stats, err := rp.Replay(ctx, members)
	if err != nil {
		return state.Digest{}, err
	}
	d := st.Digest(c.at)
	b, _ := json.MarshalIndent(d, "", "  ")
	fmt.Fprintf(c.out, "branch %s: %d events\nbranch state %s\n", c.branch, stats.Valid, b)
	return d, nil
}

// copyMembers copies the lines of path whose event belongs to branch
// under v.
func copyMembers(path string, w io.Writer, v *branches.View, branch string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	bw := bufio.NewWriter(w)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		e, err := protocol.DecodeJSON(unwrapExport(line))
		if err != nil {
			continue // invalid: the replay of the members would reject it too
		}
		for _, b := range v.Members(e) {
			if b == branch {
				bw.Write(line)
				bw.WriteByte('\n')
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return bw.Flush()
}

// unwrapExport returns the event of an export line ({"seq", "event"}), or
// the line itself.
func unwrapExport(b []byte) []byte {
	if bytes.Contains(b[:min(len(b), 16)], []byte(`"seq"`)) {
		var wrapped struct {
			Event json.RawMessage `json:"event"`
		}
		if json.Unmarshal(b, &wrapped) == nil && len(wrapped.Event) > 0 {
			return wrapped.Event
		}
	}
	return b
}
