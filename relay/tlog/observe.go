package tlog

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// observeEvery is how often a relay checks the checkpoints of the peers
// it mirrors (Options.Observe).
const observeEvery = 5 * time.Second

// observeLoop witnesses the logs of the peers the relay mirrors: every
// observeEvery it fetches each one's checkpoint and checks it extends the
// last one it verified (see observe).
func (m *Module) observeLoop(ctx context.Context) {
	t := time.NewTicker(observeEvery)
	defer t.Stop()
	for {
		for _, peer := range m.opts.Observe {
			if err := m.observe(ctx, peer); err != nil {
				m.logger.Debug("tlog: peer checkpoint not checked", "peer", peer, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// observe fetches peer's log key (learned on first contact, then held
// to), its checkpoint, and a consistency proof from the last checkpoint
// this witness verified for that log; a checkpoint that cannot extend it
// (or be extended by it) is an alarm, and one that does becomes the last
// verified. An add-checkpoint from the peer continues from there.
func (m *Module) observe(ctx context.Context, peer string) error {
	w := m.witness
	b, err := getPeer(ctx, peer, "/tlog/key")
	if err != nil {
		return err
	}
	vkey := strings.TrimSpace(string(b))
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return fmt.Errorf("key %q: %w", vkey, err)
	}
	origin := v.Name()
	m.peerOrigins.Store(strings.TrimRight(peer, "/"), origin)
	w.mu.Lock()
	known := w.logs[origin]
	if known == nil {
		w.logs[origin] = v
		if w.state.Keys == nil {
			w.state.Keys = map[string]string{}
		}
		w.state.Keys[origin] = vkey
		w.save()
		known = v
	}
	prev := w.state.Logs[origin]
	w.mu.Unlock()
	if known.KeyHash() != v.KeyHash() {
		return fmt.Errorf("peer %s now announces another key for %s", peer, origin)
	}
	raw, err := getPeer(ctx, peer, "/tlog/checkpoint")
	if err != nil {
		return err
	}
	n, err := note.Open(raw, note.VerifierList(known))
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	_, size, root, err := ParseCheckpoint(n.Text)
	if err != nil {
		return err
	}
	if prev != nil && prev.Size > 0 {
		if err := m.peerConsistent(ctx, peer, prev, size, root); err != nil {
			w.mu.Lock()
			if w.state.Logs[origin] == prev {
				w.alarm(origin, prev.Note, string(raw), err.Error())
			}
			w.mu.Unlock()
			return err
		}
		if size <= prev.Size {
			return nil
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state.Logs[origin] == prev {
		w.state.Logs[origin] = &witnessed{Size: size, Root: root[:], Note: string(raw)}
		return w.save()
	}
	return nil
}

// peerConsistent checks the peer's (size, root) and prev can both be
// true: the smaller tree is a prefix of the larger, by the peer's own
// consistency proof.
func (m *Module) peerConsistent(ctx context.Context, peer string, prev *witnessed, size int64, root tlog.Hash) error {
	if size == prev.Size {
		if tlog.Hash(prev.Root) != root {
			return fmt.Errorf("two checkpoints of %d entries with different roots", size)
		}
		return nil
	}
	from, fromRoot, to, toRoot := prev.Size, tlog.Hash(prev.Root), size, root
	if size < prev.Size {
		from, fromRoot, to, toRoot = size, root, prev.Size, tlog.Hash(prev.Root)
	}
	b, err := getPeer(ctx, peer, fmt.Sprintf("/tlog/consistency?from=%d&to=%d", from, to))
	if err != nil {
		return fmt.Errorf("no consistency proof from %d to %d: %w", from, to, err)
	}
	if err := CheckConsistencyAnswer(b, from, fromRoot, to, toRoot); err != nil {
		return fmt.Errorf("the checkpoints of %d and %d entries: %w", from, to, err)
	}
	return nil
}

// getPeer fetches path from a peer within witnessTimeout (a 200 body of
// at most 64 KiB, else an error).
func getPeer(ctx context.Context, peer, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, witnessTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(peer, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return b, nil
}
