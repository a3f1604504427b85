package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/anp2net/relay/relay/eventlog"
)

// TestAdmitSeesEveryEarlierCommit appends from many goroutines, some
// records with an Admit rule. Each rule must find the hook caught up with
// every committed event (the log's count equals what the hook saw), a
// refused record must not be stored, and an admitted one must come right
// after the state its rule saw.
func TestAdmitSeesEveryEarlierCommit(t *testing.T) {
	var folded atomic.Int64
	s, err := Open(filepath.Join(t.TempDir(), "log.db"), func(c []Committed) { folded.Add(int64(len(c))) })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var _ interface{ Admits() bool } = s
	ctx := context.Background()
	refuse := errors.New("refused")
	var wg sync.WaitGroup
	var mu sync.Mutex
	judged := map[string]int64{} // id → events committed when its rule ran
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				e := ev(key(g+1), int64(i), 1, fmt.Sprint(g, "/", i))
				rec := Record{Event: e}
				if i%4 == 3 {
					rec.Admit = func() error {
						st, err := s.Stats(ctx)
						if err != nil {
							return err
						}
						if f := folded.Load(); f != st.Events {
							t.Errorf("rule ran with %d events committed but %d folded", st.Events, f)
						}
						mu.Lock()
						judged[e.ID] = st.Events
						mu.Unlock()
						if i%8 == 7 {
							return refuse
						}
						return nil
					}
				}
				// Half the goroutines append through AppendBatch.
				var err error
				var res eventlog.Result
				if g%2 == 0 {
					res, err = s.Append(ctx, rec)
				} else {
					var rs []eventlog.Result
					if rs, err = s.AppendBatch(ctx, []Record{rec}); err == nil {
						res = rs[0]
					}
				}
				switch {
				case rec.Admit != nil && i%8 == 7:
					if !errors.Is(err, refuse) {
						t.Errorf("a refused record: %v", err)
					}
					if _, found, _ := s.Lookup(ctx, e.ID); found {
						t.Errorf("a refused record was stored")
					}
				case err != nil:
					t.Error(err)
				case rec.Admit != nil:
					mu.Lock()
					n := judged[e.ID]
					mu.Unlock()
					if res.Seq != n+1 {
						t.Errorf("admitted at seq %d, its rule saw %d events", res.Seq, n)
					}
				}
			}
		}()
	}
	wg.Wait()
	st, _ := s.Stats(ctx)
	if want := int64(8 * (40 - 5)); st.Events != want || folded.Load() != want {
		t.Fatalf("%d events stored, %d folded, want %d", st.Events, folded.Load(), want)
	}
}
