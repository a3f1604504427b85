// Package groupcommit is the writer side of an event log that commits its
// appends in groups (relay/sqlite, relay/postgres): appends are queued as
// requests, one writer goroutine takes whatever is queued into a single
// transaction, and each request is answered once that transaction has
// committed or failed. The transaction itself is the log's own.
package groupcommit

import (
	"github.com/anp2net/relay/relay/eventlog"
)

// Request is one append (or control step) on its way to the writer.
type Request struct {
	Rec eventlog.Record
	// Relaxed: a LoadBatch append, which may commit without waiting for
	// the disk.
	Relaxed bool
	// Ctl, when set, is run by the writer between transactions instead of
	// appending Rec; its error is the answer.
	Ctl  func() error
	Done chan Answer
}

// Answer is a request's outcome.
type Answer struct {
	Res eventlog.Result
	Err error
}

// NewRequest returns the request to append rec.
func NewRequest(rec eventlog.Record, relaxed bool) *Request {
	return &Request{Rec: rec, Relaxed: relaxed, Done: make(chan Answer, 1)}
}

// NewControl returns the request to run fn on the writer between
// transactions.
func NewControl(fn func() error) *Request {
	return &Request{Ctl: fn, Done: make(chan Answer, 1)}
}

// AppendAll queues an append of each of recs on queue and returns once
// all are answered: their results, and the first error. It returns
// errClosed if closed is closed before all are queued.
func AppendAll(queue chan<- *Request, closed <-chan struct{}, errClosed error, recs []eventlog.Record, relaxed bool) ([]eventlog.Result, error) {
	reqs := make([]*Request, len(recs))
	for i, rec := range recs {
		reqs[i] = NewRequest(rec, relaxed)
		select {
		case queue <- reqs[i]:
		case <-closed:
			return nil, errClosed
		}
	}
	out := make([]eventlog.Result, len(recs))
	var firstErr error
	for i, r := range reqs {
		res := <-r.Done
		out[i] = res.Res
		if res.Err != nil && firstErr == nil {
			firstErr = res.Err
		}
	}
	return out, firstErr
}

// AnswerAll answers each request of batch: with err when it is set, else
// with its result.
func AnswerAll(batch []*Request, results []eventlog.Result, err error) {
	for i, r := range batch {
		if err != nil {
			r.Done <- Answer{Err: err}
		} else {
			r.Done <- Answer{Res: results[i]}
		}
	}
}

// Commit writes batch in one transaction with insert and hands the
// outcome to finish; when the transaction fails and batch holds several
// appends, each is written alone, so one bad record cannot sink the
// others.
func Commit(batch []*Request, insert func([]*Request) ([]eventlog.Result, []eventlog.Committed, error),
	finish func(batch []*Request, results []eventlog.Result, committed []eventlog.Committed, err error)) {
	results, committed, err := insert(batch)
	if err != nil && len(batch) > 1 {
		for _, r := range batch {
			Commit([]*Request{r}, insert, finish)
		}
		return
	}
	finish(batch, results, committed, err)
}

// Writer is a log's writer loop: it waits for a request, takes with it
// whatever else is queued, up to Limit, and commits them together. A
// control request is run alone, between transactions. After Closed is
// closed it commits what was queued before, one request at a time, and
// returns.
type Writer struct {
	Queue  <-chan *Request
	Closed <-chan struct{}
	// Limit is the most appends a transaction takes now.
	Limit func() int
	// Commit writes batch in one transaction and sees that its requests
	// are answered. The writer reuses batch afterwards.
	Commit func(batch []*Request)

	// Idle, when set, runs before the writer waits for a request; a send
	// on Wake makes it run again.
	Idle func()
	Wake <-chan struct{}
	// Gather, when set, may add further requests to a batch that holds
	// those queued when the writer took it (up to limit), or return a
	// control request it met, which runs after the batch.
	Gather func(batch []*Request, limit int) ([]*Request, *Request)
	// Committed, when set, is told the size of each batch after its
	// Commit.
	Committed func(n int)
}

// Run runs the loop until Closed is closed and the queue is drained.
func (w *Writer) Run() {
	batch := make([]*Request, 0, w.Limit())
	for {
		if w.Idle != nil {
			w.Idle()
		}
		var first *Request
		select {
		case first = <-w.Queue:
		case <-w.Wake:
			continue
		case <-w.Closed:
			w.drain(batch)
			return
		}
		if first.Ctl != nil {
			first.Done <- Answer{Err: first.Ctl()}
			continue
		}
		limit := w.Limit()
		var ctl *Request
		batch, ctl = Fill(w.Queue, append(batch[:0], first), limit)
		if ctl == nil && w.Gather != nil {
			batch, ctl = w.Gather(batch, limit)
		}
		w.Commit(batch)
		if w.Committed != nil {
			w.Committed(len(batch))
		}
		if ctl != nil {
			ctl.Done <- Answer{Err: ctl.Ctl()}
		}
	}
}

// drain commits (or runs) what was queued before Close, one at a time.
func (w *Writer) drain(batch []*Request) {
	for {
		select {
		case r := <-w.Queue:
			if r.Ctl != nil {
				r.Done <- Answer{Err: r.Ctl()}
			} else {
				w.Commit(append(batch[:0], r))
			}
		default:
			return
		}
	}
}

// Fill adds to batch the requests queued now, without waiting, until it
// holds limit; it stops at a control request and returns it.
func Fill(queue <-chan *Request, batch []*Request, limit int) ([]*Request, *Request) {
	for len(batch) < limit {
		select {
		case r := <-queue:
			if r.Ctl != nil {
				return batch, r
			}
			batch = append(batch, r)
		default:
			return batch, nil
		}
	}
	return batch, nil
}
