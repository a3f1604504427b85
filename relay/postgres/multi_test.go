package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/eventlog/logtest"
	"github.com/anp2net/relay/relay/postgres/pgtest"
)

// recorder is a commit hook that keeps what it saw.
type recorder struct {
	mu   sync.Mutex
	seqs []int64
	ids  map[int64]string
}

func (r *recorder) hook(c []eventlog.Committed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range c {
		r.seqs = append(r.seqs, x.Seq)
		r.ids[x.Seq] = x.Event.ID
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seqs)
}

// TestTwoStoresOneDatabase appends through two logs on one database, from
// several goroutines each: both hooks must see every event exactly once,
// in seq order with no gap, and agree on which event each seq is.
func TestTwoStoresOneDatabase(t *testing.T) {
	url := pgtest.DB(t)
	recs := []*recorder{{ids: map[int64]string{}}, {ids: map[int64]string{}}}
	stores := []*Store{open(t, url, recs[0].hook), open(t, url, recs[1].hook)}
	const perWorker, workers = 40, 4
	var wg sync.WaitGroup
	acked := sync.Map{}
	for si, s := range stores {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perWorker {
					e := logtest.Ev(logtest.Key(10*si+w), int64(1000+i), 1, fmt.Sprint(si, w, i))
					var err error
					if i%5 == 0 {
						_, err = s.AppendBatch(context.Background(), []eventlog.Record{{Event: e}, {Event: e}})
					} else {
						_, err = s.Append(context.Background(), eventlog.Record{Event: e})
					}
					if err != nil {
						t.Error(err)
						return
					}
					acked.Store(e.ID, true)
				}
			}()
		}
	}
	wg.Wait()
	const total = 2 * workers * perWorker
	deadline := time.Now().Add(30 * time.Second)
	for recs[0].count() < total || recs[1].count() < total {
		if time.Now().After(deadline) {
			t.Fatalf("hooks saw %d and %d of %d events", recs[0].count(), recs[1].count(), total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for ri, r := range recs {
		r.mu.Lock()
		if len(r.seqs) != total {
			t.Errorf("hook %d saw %d events, want %d (a duplicate delivery)", ri, len(r.seqs), total)
		}
		for i, seq := range r.seqs {
			if seq != int64(i+1) {
				t.Fatalf("hook %d: delivery %d is seq %d: a gap or out of order", ri, i, seq)
			}
			if _, ok := acked.Load(r.ids[seq]); !ok {
				t.Fatalf("hook %d: seq %d is an event nobody appended", ri, seq)
			}
		}
		r.mu.Unlock()
	}
	for seq := int64(1); seq <= total; seq++ {
		if recs[0].ids[seq] != recs[1].ids[seq] {
			t.Fatalf("the logs disagree on seq %d", seq)
		}
	}
	st, err := stores[1].Stats(context.Background())
	if err != nil || st.Events != total || st.MaxSeq != total {
		t.Fatalf("%+v %v", st, err)
	}
}

// TestJoinWhileAnotherAppends opens a second log while the first appends,
// rebuilds from an export and then sets its hook, as a relay starting
// beside a running one does: the export and the hook together give every
// seq exactly once, in order.
func TestJoinWhileAnotherAppends(t *testing.T) {
	url := pgtest.DB(t)
	a := open(t, url, nil)
	const total = 300
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range total {
			if i == 50 {
				close(started)
			}
			e := logtest.Ev(logtest.Key(1), int64(i), 1, fmt.Sprint(i))
			if _, err := a.Append(context.Background(), eventlog.Record{Event: e}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	<-started
	b := open(t, url, nil)
	var seqs []int64
	if err := b.Export(context.Background(), 0, func(int64) error { return nil }, func(seq int64, _ []byte) error {
		seqs = append(seqs, seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	exported := len(seqs)
	rec := &recorder{ids: map[int64]string{}}
	b.SetHook(rec.hook)
	<-done
	deadline := time.Now().Add(30 * time.Second)
	for exported+rec.count() < total && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	rec.mu.Lock()
	seqs = append(seqs, rec.seqs...)
	rec.mu.Unlock()
	if len(seqs) != total {
		t.Fatalf("export (%d) and hook together gave %d seqs, want %d", exported, len(seqs), total)
	}
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("position %d holds seq %d (exported %d first)", i, seq, exported)
		}
	}
	if exported >= total {
		t.Log("the export already held every event: the hook's catch-up was not exercised")
	}
}
