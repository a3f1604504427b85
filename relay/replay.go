package relay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/state"
)

// ReplayStats counts what a replay read.
type ReplayStats struct {
	Read      int            `json:"read"`
	Valid     int            `json:"valid"`
	Duplicate int            `json:"duplicate"`
	Rejected  map[string]int `json:"rejected"`
	Kinds     map[int64]int  `json:"kinds"`
	Folded    int            `json:"folded"`
	Phase     string         `json:"phase"`
	Invalid   []Invalid      `json:"-"`
	skip      map[int]struct{}
}

// Replayer rebuilds every derived view from a log of JSON lines (events or
// export lines), verifying each event as the relay does at publish — id,
// signature, PoW, kind rules; not the freshness window or rate limits —
// and folding only the valid ones. It reads the log twice: the first pass
// verifies on every core and registers revocations, the second folds, so
// no event ever has to be withdrawn and memory stays at one id per event.
type Replayer struct {
	Checker protocol.Checker
	Now     int64
	Options state.Options
	// OnProgress, when set, is called every few thousand lines.
	OnProgress func(ReplayStats)
}

// Replay reads the log open returns, twice, and returns the folded state.
func (rp *Replayer) Replay(ctx context.Context, open func() (io.ReadCloser, error)) (*state.State, ReplayStats, error) {
	st := ReplayStats{Rejected: map[string]int{}, Kinds: map[int64]int{}, skip: map[int]struct{}{}, Phase: "verify"}
	s := state.New(rp.Options)
	if err := rp.verifyPass(ctx, open, s, &st); err != nil {
		return nil, st, err
	}
	st.Phase = "fold"
	if err := rp.foldPass(ctx, open, s, &st); err != nil {
		return nil, st, err
	}
	st.Phase = "done"
	return s, st, nil
}

type replayItem struct {
	line int
	raw  []byte
	ev   *protocol.Event
	err  error
}

// lines feeds the non-blank lines of r, numbered from 1, into a channel.
func lines(ctx context.Context, r io.Reader, errp *error) <-chan replayItem {
	out := make(chan replayItem, 1024)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		n := 0
		for sc.Scan() {
			n++
			b := bytes.TrimSpace(sc.Bytes())
			if len(b) == 0 {
				continue
			}
			select {
			case out <- replayItem{line: n, raw: append([]byte(nil), b...)}:
			case <-ctx.Done():
				return
			}
		}
		*errp = sc.Err()
	}()
	return out
}

// parallel runs work on every item with one worker per core.
func parallel(in <-chan replayItem, work func(*replayItem)) <-chan replayItem {
	out := make(chan replayItem, 1024)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range in {
				work(&it)
				out <- it
			}
		}()
	}
	go func() { wg.Wait(); close(out) }()
	return out
}

func (rp *Replayer) verifyPass(ctx context.Context, open func() (io.ReadCloser, error), s *state.State, st *ReplayStats) error {
	r, err := open()
	if err != nil {
		return err
	}
	defer r.Close()
	checker := rp.Checker
	checker.Limits.MaxAge = 0
	var readErr error
	results := parallel(lines(ctx, r, &readErr), func(it *replayItem) {
		it.ev, _, it.err = verifyLine(it.raw, checker, rp.Now)
		it.raw = nil
	})
	seen := make(map[[32]byte]struct{})
	for it := range results {
		st.Read++
		if it.err == nil && it.ev.Kind == protocol.KindHealth {
			it.err = protocol.Errorf("kind_11_not_stored", "kind 11 health beats are never stored")
		}
		if it.err != nil {
			st.skip[it.line] = struct{}{}
			st.reject(it)
			continue
		}
		var id [32]byte
		hex.Decode(id[:], []byte(it.ev.ID))
		if _, dup := seen[id]; dup {
			st.skip[it.line] = struct{}{}
			st.Duplicate++
			continue
		}
		seen[id] = struct{}{}
		st.Valid++
		st.Kinds[it.ev.Kind]++
		s.Preload(it.ev)
		if rp.OnProgress != nil && st.Read%4096 == 0 {
			rp.OnProgress(*st)
		}
	}
	sort.Slice(st.Invalid, func(i, j int) bool { return st.Invalid[i].Line < st.Invalid[j].Line })
	if readErr == nil {
		readErr = ctx.Err()
	}
	return readErr
}

func (st *ReplayStats) reject(it replayItem) {
	code := "invalid"
	var pe *protocol.Error
	var env *protocol.EnvelopeError
	switch {
	case errors.As(it.err, &pe):
		code = pe.Code
	case errors.As(it.err, &env):
		code = "malformed_envelope"
	}
	st.Rejected[code]++
	inv := Invalid{Line: it.line, Code: code, Err: it.err.Error()}
	if it.ev != nil {
		inv.ID = it.ev.ID
	}
	if len(st.Invalid) < 1000 {
		st.Invalid = append(st.Invalid, inv)
	}
}

func (rp *Replayer) foldPass(ctx context.Context, open func() (io.ReadCloser, error), s *state.State, st *ReplayStats) error {
	r, err := open()
	if err != nil {
		return err
	}
	defer r.Close()
	var readErr error
	in := make(chan replayItem, 1024)
	go func() {
		defer close(in)
		for it := range lines(ctx, r, &readErr) {
			if _, skip := st.skip[it.line]; !skip {
				in <- it
			}
		}
	}()
	decoded := parallel(in, func(it *replayItem) {
		b := unwrapExportLine(it.raw)
		var e protocol.Event
		if it.err = json.Unmarshal(b, &e); it.err == nil {
			it.ev = &e
		}
		it.raw = nil
	})
	for it := range decoded {
		if it.err != nil {
			return fmt.Errorf("line %d changed between passes: %w", it.line, it.err)
		}
		st.Folded++
		s.Add(int64(st.Folded), it.ev, nil)
		if rp.OnProgress != nil && st.Folded%4096 == 0 {
			rp.OnProgress(*st)
		}
	}
	if readErr == nil {
		readErr = ctx.Err()
	}
	if readErr == nil && st.Folded != st.Valid {
		readErr = fmt.Errorf("the log changed between passes: %d valid events, %d folded", st.Valid, st.Folded)
	}
	return readErr
}

// unwrapExportLine returns the event of an export line {"seq":N,"event":…},
// or b itself.
func unwrapExportLine(b []byte) []byte {
	if bytes.Contains(b[:min(len(b), 16)], []byte(`"seq"`)) {
		var wrapped struct {
			Event json.RawMessage `json:"event"`
		}
		if err := json.Unmarshal(b, &wrapped); err == nil && len(wrapped.Event) > 0 {
			return wrapped.Event
		}
	}
	return b
}
