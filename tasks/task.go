package tasks

import (
	"bytes"
	"sort"
	"sync/atomic"

	"github.com/anp2net/relay/protocol"
)

// rec is the compact record of one lifecycle event: what the derivation and
// the views need, not the event itself (the store keeps that).
type rec struct {
	id     [32]byte
	at     int64
	agent  uint32 // interned agent_id
	kind   int8
	valid  bool // content passed the kind's protocol parser
	parsed any  // *protocol.TaskRequest, *TaskAccept, ... when valid
	// invalid is the code of the first kind-rule violation when !valid.
	// Such events reach the fold from peers and imports (D15): stored,
	// never counting.
	invalid string
}

func newRec(ev *protocol.Event, id [32]byte) *rec {
	r := &rec{id: id, at: ev.CreatedAt, kind: int8(ev.Kind)}
	var errs []error
	switch ev.Kind {
	case protocol.KindTaskRequest:
		r.parsed, errs = protocol.ParseTaskRequest(ev)
	case protocol.KindTaskAccept:
		r.parsed, errs = protocol.ParseTaskAccept(ev)
	case protocol.KindTaskResult:
		r.parsed, errs = protocol.ParseTaskResult(ev)
	case protocol.KindTaskVerify:
		r.parsed, errs = protocol.ParseTaskVerify(ev)
	case protocol.KindPayment:
		r.parsed, errs = protocol.ParseTaskPayment(ev)
	case protocol.KindTaskCancel:
		r.parsed, errs = protocol.ParseTaskCancel(ev)
	}
	r.valid = len(errs) == 0
	if !r.valid {
		r.parsed = nil
		r.invalid = protocol.CodeOf(errs[0])
		return r
	}
	slim(r.parsed)
	return r
}

// slim drops what the fold never reads from parsed content (the task id is
// the record's key, warnings are publish's), so that a record holds what
// the saved form holds and no more.
func slim(parsed any) {
	switch p := parsed.(type) {
	case *protocol.TaskRequest:
		p.Warnings = nil
	case *protocol.TaskAccept:
		p.TaskID, p.Warnings = "", nil
	case *protocol.TaskResult:
		p.TaskID, p.Warnings = "", nil
	case *protocol.TaskVerify:
		p.TaskID, p.Warnings = "", nil
	case *protocol.TaskPayment:
		p.TaskID, p.Warnings = "", nil
	case *protocol.TaskCancel:
		p.TaskID, p.Warnings = "", nil
	}
}

func (r *rec) accept() *protocol.TaskAccept   { return r.parsed.(*protocol.TaskAccept) }
func (r *rec) result() *protocol.TaskResult   { return r.parsed.(*protocol.TaskResult) }
func (r *rec) verify() *protocol.TaskVerify   { return r.parsed.(*protocol.TaskVerify) }
func (r *rec) payment() *protocol.TaskPayment { return r.parsed.(*protocol.TaskPayment) }

// recLess orders records by (created_at, id), protocol.Less on the raw id
// (byte order equals the order of the lowercase hex).
func recLess(a, b *rec) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return bytes.Compare(a.id[:], b.id[:]) < 0
}

// task holds one task's events. Kinds 51–55 may arrive before the kind 50;
// the task is visible once its request is present and valid.
type task struct {
	id       [32]byte
	req      *rec
	request  *protocol.TaskRequest // nil unless req is present and valid
	lists    [5][]*rec             // kinds 51..55, each by (created_at, id)
	gen      uint64                // fold generation of the last change
	inCredit bool
	cache    atomic.Pointer[derivation]
}

func (t *task) list(kind int64) []*rec { return t.lists[kind-protocol.KindTaskAccept] }

// insert adds r to its kind's list; false when its id is already there.
func (t *task) insert(r *rec) bool {
	l := &t.lists[int64(r.kind)-protocol.KindTaskAccept]
	i := sort.Search(len(*l), func(i int) bool { return !recLess((*l)[i], r) })
	if i < len(*l) && (*l)[i].id == r.id {
		return false
	}
	*l = append(*l, nil)
	copy((*l)[i+1:], (*l)[i:])
	(*l)[i] = r
	return true
}

// remove deletes the record with r's id; false when it is not there.
func (t *task) remove(r *rec) bool {
	l := &t.lists[int64(r.kind)-protocol.KindTaskAccept]
	i := sort.Search(len(*l), func(i int) bool { return !recLess((*l)[i], r) })
	if i == len(*l) || (*l)[i].id != r.id {
		return false
	}
	*l = append((*l)[:i], (*l)[i+1:]...)
	return true
}
