package offline

import (
	"context"
	"fmt"
	"io"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// ImportStats counts what an import did.
type ImportStats struct {
	Read      int            `json:"read"`
	Accepted  int            `json:"accepted"`
	Duplicate int            `json:"duplicate"`
	Rejected  map[string]int `json:"rejected"`
}

// Invalid describes one rejected line.
type Invalid struct {
	Line int    `json:"line"`
	ID   string `json:"id,omitempty"`
	Code string `json:"code"`
	Err  string `json:"detail"`
}

// Importer verifies JSON-lines events on every core and appends the valid
// ones in large group commits. It checks envelope, limits, id, signature
// and PoW (protocol.Checker.CheckStored) but not the freshness window
// (history is old by nature) nor kind content rules (D15: an authentic event
// is stored and the folds judge its content). Kind 11 beats are skipped
// (never stored).
type Importer struct {
	Store   eventlog.Log
	Checker protocol.Checker
	Now     int64
	// OnInvalid, when set, receives every rejected line.
	OnInvalid func(Invalid)
	// OnProgress, when set, is called after each appended batch.
	OnProgress func(ImportStats)
	// OnPhase, when set, is told when a bulk load starts and which step
	// of its end runs.
	OnPhase func(string)
}

// bulkMin is the smallest import that switches to a bulk load (below it,
// dropping and rebuilding indexes costs more than it saves); a variable so
// tests can lower it.
var bulkMin = 20000

// Import reads r to the end. Lines are event objects, or export lines
// {"seq":N,"event":{...}}; blank lines are skipped.
func (im *Importer) Import(ctx context.Context, r io.Reader) (ImportStats, error) {
	st := ImportStats{Rejected: map[string]int{}}
	checker := im.Checker
	checker.Limits.MaxAge = 0
	var readErr error
	results := parallel(lines(ctx, r, &readErr), func(it *lineItem) {
		it.ev, it.raw, it.err = verifyLine(it.raw, checker, im.Now)
		if it.err == nil {
			it.rec = eventlog.NewRecord(it.ev, it.raw, "json", im.Now)
		}
	})
	err := im.appendAll(ctx, results, &st)
	if err == nil {
		err = readErr
	}
	return st, err
}

// appendAll appends in batches. Once an import has added as many events as
// the log held when it began (and at least bulkMin), the rest goes in as a
// bulk load (eventlog.Log.BeginBulk) in larger batches.
func (im *Importer) appendAll(ctx context.Context, results <-chan lineItem, st *ImportStats) (err error) {
	size, err := im.Store.Stats(ctx)
	if err != nil {
		return err
	}
	bulkAfter := max(bulkMin, int(size.Events))
	bulk := false
	defer func() {
		if bulk {
			if endErr := im.Store.EndBulk(im.OnPhase); err == nil {
				err = endErr
			}
		}
	}()
	// One batch commits while the next is read and verified.
	type inFlight struct {
		res []eventlog.Result
		err error
	}
	var pending chan inFlight
	wait := func() error {
		if pending == nil {
			return nil
		}
		done := <-pending
		pending = nil
		if done.err != nil {
			return fmt.Errorf("append: %w", done.err)
		}
		for _, r := range done.res {
			if r.Duplicate {
				st.Duplicate++
			} else {
				st.Accepted++
			}
		}
		if im.OnProgress != nil {
			im.OnProgress(*st)
		}
		return nil
	}
	var batch []eventlog.Record
	limit := min(2048, bulkAfter)
	flush := func() error {
		if err := wait(); err != nil {
			return err
		}
		if !bulk && st.Accepted >= bulkAfter {
			if err := im.Store.BeginBulk(ctx); err != nil {
				return err
			}
			bulk, limit = true, 8192
			if im.OnPhase != nil {
				im.OnPhase("bulk load")
			}
		}
		if len(batch) == 0 {
			return nil
		}
		recs := batch
		batch = nil
		pending = make(chan inFlight, 1)
		append := im.Store.AppendBatch
		if bulk {
			append = im.Store.LoadBatch // EndBulk makes it durable
		}
		go func(done chan<- inFlight) {
			res, err := append(ctx, recs)
			done <- inFlight{res, err}
		}(pending)
		return nil
	}
	var failed error
	for it := range results {
		if failed != nil {
			continue // drain so the workers finish
		}
		st.Read++
		if it.err != nil {
			code := protocol.CodeOf(it.err)
			st.Rejected[code]++
			if im.OnInvalid != nil {
				inv := Invalid{Line: it.line, Code: code, Err: it.err.Error()}
				if it.ev != nil {
					inv.ID = it.ev.ID
				}
				im.OnInvalid(inv)
			}
			continue
		}
		if it.ev.Kind == protocol.KindHealth {
			st.Rejected["kind_11_not_stored"]++
			continue
		}
		batch = append(batch, it.rec)
		if len(batch) >= limit {
			failed = flush()
		}
	}
	if failed != nil {
		wait()
		return failed
	}
	if err := flush(); err != nil {
		return err
	}
	return wait()
}

// verifyLine decodes one line (unwrapping export lines) and checks it.
func verifyLine(b []byte, c protocol.Checker, now int64) (*protocol.Event, []byte, error) {
	b = unwrapExportLine(b)
	e, err := protocol.DecodeJSON(b)
	if err != nil {
		return nil, b, err
	}
	return e, b, c.CheckStored(e, now)
}
