package offline

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/state"
)

// ReplayStats counts what a replay read.
type ReplayStats struct {
	Read      int            `json:"read"`
	Valid     int            `json:"valid"`
	Duplicate int            `json:"duplicate"`
	Rejected  map[string]int `json:"rejected"`
	Kinds     map[int64]int  `json:"kinds"`
	// Withheld counts the tombstones read (SPEC §21.8): events whose body
	// the log withholds, counted in Valid.
	Withheld int `json:"withheld"`
	// AddCost is the mean time of one fold (State.Add) over the 8192
	// events before each power-of-ten count (10^4, 10^5, …) was reached,
	// and before the last event.
	AddCost map[int]time.Duration `json:"add_cost_ns"`
	// Invalid lists the first 1000 invalid lines, by line number.
	Invalid []Invalid `json:"-"`
}

// Replayer rebuilds every derived view from a log file of JSON lines
// (events or export lines), verifying each event as the relay verifies what
// it stores from peers and imports — envelope, limits, id, signature, PoW;
// not the freshness window, rate limits or kind content rules (D15), so it
// folds the same set the relay stored — and folding them exactly as the
// live relay does.
// Verification runs on every core while one goroutine folds; a revocation
// fetches its already-folded target back from the file by offset, so
// memory holds one id and offset per event, not the events.
type Replayer struct {
	Checker protocol.Checker
	Now     int64
	Options state.Options
	// OnProgress, when set, is called every few thousand lines.
	OnProgress func(ReplayStats)
}

// lineItem is one line of a JSON-lines log on its way through the
// parallel verifiers of the importer and the replayer.
type lineItem struct {
	line   int
	offset int64
	raw    []byte
	ev     *protocol.Event
	rec    eventlog.Record // importer only: the record to append
	err    error
	// withheld is set for a tombstone line (replayer only): its id and why.
	withheld *withheldLine
}

// withheldLine is a tombstone read from a log (SPEC §21.8).
type withheldLine struct {
	id string
	w  eventlog.Withholding
}

// Replay verifies and folds the log at path and returns the state.
func (rp *Replayer) Replay(ctx context.Context, path string) (*state.State, ReplayStats, error) {
	st := ReplayStats{Rejected: map[string]int{}, Kinds: map[int64]int{}, AddCost: map[int]time.Duration{}}
	f, err := os.Open(path)
	if err != nil {
		return nil, st, err
	}
	defer f.Close()
	checker := rp.Checker
	checker.Limits.MaxAge = 0
	var readErr error
	results := parallel(lines(ctx, f, &readErr), func(it *lineItem) {
		if id, w, ok := eventlog.WithheldOf(unwrapExportLine(it.raw)); ok {
			it.withheld, it.raw = &withheldLine{id, w}, nil
			return
		}
		it.ev, _, it.err = verifyLine(it.raw, checker, rp.Now)
		it.raw = nil
	})
	s := state.New(rp.Options)
	offsets := make(map[[32]byte]int64)
	lookup := func(id string) *protocol.Event {
		var k [32]byte
		if n, err := hex.Decode(k[:], []byte(id)); err != nil || n != 32 {
			return nil
		}
		off, ok := offsets[k]
		if !ok {
			return nil
		}
		e, err := eventAt(f, off)
		if err != nil {
			return nil
		}
		return e
	}
	var cost addCost
	withheld := make(map[string]bool)
	for it := range results {
		st.Read++
		if it.withheld != nil {
			// A tombstone is in the set and in no view; it is not a
			// revocation's target (no offset: its line is no event).
			if id := it.withheld.id; withheld[id] {
				st.Duplicate++
			} else {
				withheld[id] = true
				st.Valid++
				st.Withheld++
				s.AddWithheld(int64(st.Valid), id, it.withheld.w)
			}
			continue
		}
		if it.err == nil && it.ev.Kind == protocol.KindHealth {
			it.err = protocol.Errorf("kind_11_not_stored", "kind 11 health beats are never stored")
		}
		if it.err != nil {
			st.reject(it)
			continue
		}
		var id [32]byte
		hex.Decode(id[:], []byte(it.ev.ID))
		if _, dup := offsets[id]; dup {
			st.Duplicate++
			continue
		}
		offsets[id] = it.offset
		st.Valid++
		st.Kinds[it.ev.Kind]++
		t0 := time.Now()
		s.Add(int64(st.Valid), it.ev, lookup)
		cost.record(time.Since(t0), st.Valid, st.AddCost)
		if rp.OnProgress != nil && st.Read%4096 == 0 {
			rp.OnProgress(st)
		}
	}
	if st.Valid > 0 {
		st.AddCost[st.Valid] = cost.sum / time.Duration(min(st.Valid, len(cost.window)))
	}
	sort.Slice(st.Invalid, func(i, j int) bool { return st.Invalid[i].Line < st.Invalid[j].Line })
	if readErr == nil {
		readErr = ctx.Err()
	}
	if readErr != nil {
		return nil, st, readErr
	}
	return s, st, nil
}

// addCost keeps a moving window of fold times.
type addCost struct {
	window [8192]time.Duration
	sum    time.Duration
	next   int
}

func (a *addCost) record(d time.Duration, n int, out map[int]time.Duration) {
	if a.next == 0 {
		a.next = 10000
	}
	slot := &a.window[n%len(a.window)]
	a.sum += d - *slot
	*slot = d
	if n == a.next {
		out[n] = a.sum / time.Duration(min(n, len(a.window)))
		a.next *= 10
	}
}

// eventAt reads and decodes the line starting at off.
func eventAt(f *os.File, off int64) (*protocol.Event, error) {
	r := bufio.NewReader(io.NewSectionReader(f, off, 8<<20))
	line, err := r.ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var e protocol.Event
	if err := json.Unmarshal(unwrapExportLine(bytes.TrimSpace(line)), &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// lines feeds the non-blank lines of r, numbered from 1 with their byte
// offsets, into a channel.
func lines(ctx context.Context, r io.Reader, errp *error) <-chan lineItem {
	out := make(chan lineItem, 1024)
	go func() {
		defer close(out)
		br := bufio.NewReaderSize(r, 1<<20)
		var off int64
		for n := 1; ; n++ {
			b, err := br.ReadBytes('\n')
			start := off
			off += int64(len(b))
			if t := bytes.TrimSpace(b); len(t) > 0 {
				select {
				case out <- lineItem{line: n, offset: start, raw: t}:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					*errp = err
				}
				return
			}
		}
	}()
	return out
}

// parallel runs work on every item with one worker per core.
func parallel(in <-chan lineItem, work func(*lineItem)) <-chan lineItem {
	out := make(chan lineItem, 1024)
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

func (st *ReplayStats) reject(it lineItem) {
	code := protocol.CodeOf(it.err)
	st.Rejected[code]++
	inv := Invalid{Line: it.line, Code: code, Err: it.err.Error()}
	if it.ev != nil {
		inv.ID = it.ev.ID
	}
	if len(st.Invalid) < 1000 {
		st.Invalid = append(st.Invalid, inv)
	}
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
