package delivery

import (
	"sync"

	"github.com/anp2net/relay/relay/eventlog"
)

// maxFeed is how many committed events the feed holds for the matcher;
// a commit that finds it full is left to the log (feed.gap).
const maxFeed = 4096

// feed hands the matcher the events the relay commits, as its commit
// hook receives them (in commit order, which is sequence order), so a
// live matcher reads neither the log nor JSON again: it matches the
// events the relay already holds. What the feed lacks the matcher reads
// from the log, as before: events committed before the module started
// (a restart's backlog), and any commit the feed dropped (full, or
// while no trigger existed). gap is the highest sequence of those: once
// the matcher's cursor reaches it, every later event is in the feed.
type feed struct {
	mu    sync.Mutex
	items []eventlog.Committed
	gap   int64
	max   int
}

// add appends a committed batch, or records it as a gap when keep is
// false or the feed is full.
func (f *feed) add(batch []eventlog.Committed, keep bool) {
	if len(batch) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !keep || len(f.items)+len(batch) > f.max {
		f.gap = max(f.gap, batch[len(batch)-1].Seq)
		return
	}
	f.items = append(f.items, batch...)
}

// markGap records that events up to seq may be missing from the feed.
func (f *feed) markGap(seq int64) {
	f.mu.Lock()
	f.gap = max(f.gap, seq)
	f.mu.Unlock()
}

// after returns the feed's events past cursor (at most n; the caller
// must not change them), and false when the feed may lack some of them:
// the caller then reads the log instead. Events at or before cursor are
// let go.
func (f *feed) after(cursor int64, n int) ([]eventlog.Committed, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := 0
	for i < len(f.items) && f.items[i].Seq <= cursor {
		i++
	}
	if i > 0 {
		// Let the matched events go (the array is reused: clear the
		// pointers so the events can be collected).
		rest := copy(f.items, f.items[i:])
		clear(f.items[rest:])
		f.items = f.items[:rest]
	}
	if cursor < f.gap {
		return nil, false
	}
	return f.items[:min(n, len(f.items)):min(n, len(f.items))], true
}
