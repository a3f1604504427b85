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
