package groupcommit

import (
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// TestWriterGroupsAndIsolatesFailures runs the loop with a transaction that
// fails whenever it holds the record named "bad": that record's append
// fails alone, every other append gets its own seq, a control request
// runs between transactions, and Close drains what was queued.
func TestWriterGroupsAndIsolatesFailures(t *testing.T) {
	queue := make(chan *Request, 64)
	closed := make(chan struct{})
	errBad := errors.New("bad record")
	var seq int64
	var sizes []int
	insert := func(batch []*Request) ([]eventlog.Result, []eventlog.Committed, error) {
		for _, r := range batch {
			if r.Rec.Event.ID == "bad" {
				return nil, nil, errBad
			}
		}
		out := make([]eventlog.Result, len(batch))
		for i := range batch {
			seq++
			out[i] = eventlog.Result{Seq: seq}
		}
		sizes = append(sizes, len(batch))
		return out, nil, nil
	}
	w := Writer{Queue: queue, Closed: closed, Limit: func() int { return 8 },
		Commit: func(batch []*Request) {
			Commit(batch, insert, func(batch []*Request, res []eventlog.Result, _ []eventlog.Committed, err error) {
				AnswerAll(batch, res, err)
			})
		}}
	// Queue everything before the loop starts, so it is grouped.
	var recs []eventlog.Record
	for _, id := range []string{"a", "b", "bad", "c"} {
		recs = append(recs, eventlog.Record{Event: &protocol.Event{ID: id}})
	}
	var wg sync.WaitGroup
	var res []eventlog.Result
	var err error
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, err = AppendAll(queue, closed, nil, recs, false)
	}()
	for len(queue) < len(recs) {
		runtime.Gosched() // until all four are queued
	}
	ran := false
	ctl := NewControl(func() error { ran = true; return nil })
	queue <- ctl
	done := make(chan struct{})
	go func() { w.Run(); close(done) }()
	wg.Wait()
	if !errors.Is(err, errBad) || len(res) != 4 {
		t.Fatalf("AppendAll = %v, %v; want four results and the bad record's error", res, err)
	}
	if got := []int64{res[0].Seq, res[1].Seq, res[3].Seq}; got[0] != 1 || got[1] != 2 || got[2] != 3 || res[2].Seq != 0 {
		t.Errorf("seqs %v, bad record %d; want 1 2 3 and 0", got, res[2].Seq)
	}
	if a := <-ctl.Done; a.Err != nil || !ran {
		t.Errorf("control request: ran %v, %v", ran, a.Err)
	}
	last := NewRequest(eventlog.Record{Event: &protocol.Event{ID: "d"}}, false)
	queue <- last
	close(closed)
	<-done
	if a := <-last.Done; a.Err != nil || a.Res.Seq != 4 {
		t.Errorf("append queued before Close: %+v", a)
	}
	if len(sizes) == 0 || sizes[0] != 1 {
		t.Errorf("batch sizes %v: the failed group of four is not retried one at a time", sizes)
	}
}
