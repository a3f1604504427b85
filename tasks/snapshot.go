package tasks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/protocol/binform"
)

// The saved form is the fold's own records (SPEC §2.2): the agent table,
// then every task by id with its request and its kind 51–55 lists, each
// record with its id, time, author index, validity and parsed content.
// Restore reads no event back from the log; a restored fold holds the
// records a refold of the same events would hold, so its views, its
// digest and the credit derived from it are the same.
const snapshotVersion = "tasks.state/3"

// SnapshotVersion names the Fold's saved form.
func (f *Fold) SnapshotVersion() string { return snapshotVersion }

// Snapshot writes f's tasks and records to w.
func (f *Fold) Snapshot(w io.Writer) error { return f.CaptureSnapshot()(w) }

// savedTask is a copy of one task's lists, taken under the read lock.
// Records are immutable once added, so the copy shares them.
type savedTask struct {
	id       [32]byte
	req      *rec
	lists    [5][]*rec
	inCredit bool
}

// CaptureSnapshot copies what Snapshot writes and returns the function that
// encodes the copy: it may run while events are added and removed.
func (f *Fold) CaptureSnapshot() func(w io.Writer) error {
	f.mu.RLock()
	names := f.names[:len(f.names):len(f.names)]
	ts := make([]savedTask, 0, len(f.tasks))
	for _, t := range f.tasks {
		st := savedTask{id: t.id, req: t.req, inCredit: t.inCredit}
		for k, l := range t.lists {
			st.lists[k] = slices.Clone(l) // insert and remove shift lists in place
		}
		ts = append(ts, st)
	}
	f.mu.RUnlock()
	return func(w io.Writer) error {
		slices.SortFunc(ts, func(a, b savedTask) int { return bytes.Compare(a.id[:], b.id[:]) })
		e := binform.NewWriter(snapshotVersion)
		e.WriteTable(names)
		e.Int(len(ts))
		for i := range ts {
			encodeTask(e, &ts[i])
		}
		_, err := w.Write(e.Bytes())
		return err
	}
}

func encodeTask(e *binform.Writer, t *savedTask) {
	e.Raw(t.id[:])
	e.Bool(t.inCredit)
	e.Bool(t.req != nil)
	if t.req != nil {
		encodeRec(e, t.req, false)
	}
	for _, l := range t.lists {
		e.Int(len(l))
		for _, r := range l {
			encodeRec(e, r, true)
		}
	}
}

// encodeRec writes r; a request's id is its task's and is not written.
func encodeRec(e *binform.Writer, r *rec, withID bool) {
	if withID {
		e.Raw(r.id[:])
	}
	e.Varint(r.at)
	e.Int(int(r.agent))
	e.Bool(r.valid)
	if !r.valid {
		e.String(r.invalid)
		return
	}
	switch p := r.parsed.(type) {
	case *protocol.TaskRequest:
		e.String(p.Capability)
		e.Bool(p.CapAlias)
		e.Varint(p.Deadline)
		e.String(p.MaxCostUSD)
		e.Bool(p.HighStakes)
		e.String(p.Reward.Currency)
		e.String(p.Reward.Amount)
		e.String(p.Reward.PaymentMethod)
		e.String(p.Reward.EscrowMethod)
		e.Varint(p.Reward.Credits)
		rawJSON(e, p.Constraints)
		rawJSON(e, p.RewardJSON)
	case *protocol.TaskAccept:
		e.Bool(p.HasQuote)
		e.String(p.PriceQuote.Currency)
		e.String(p.PriceQuote.Amount)
		e.Varint(p.EtaUnix)
	case *protocol.TaskResult:
		e.String(p.OutputFormat)
		e.String(p.AcceptID)
	case *protocol.TaskVerify:
		e.String(p.Verdict)
		e.Bool(p.HasScore)
		e.Float64(p.Score)
	case *protocol.TaskPayment:
		for _, s := range []string{p.Disposition, p.PaymentMethod, p.Amount, p.Currency, p.TxHash, p.PaymentProofURL} {
			e.String(s)
		}
	case *protocol.TaskCancel:
		e.String(p.Reason)
	}
}

// rawJSON writes 0 for nil, else 1 + the length, then the bytes.
func rawJSON(e *binform.Writer, m json.RawMessage) {
	if m == nil {
		e.Int(0)
		return
	}
	e.Int(len(m) + 1)
	e.Raw(m)
}

func readRawJSON(d *binform.Reader) json.RawMessage {
	n := d.Count(1)
	if n == 0 {
		return nil
	}
	return bytes.Clone(d.Raw(n - 1))
}

// Restore replaces the state of an empty f with what Snapshot wrote; it
// reads no event (lookup is not used). It fails, leaving f unchanged, when
// f is not empty or the saved form is malformed.
func (f *Fold) Restore(r io.Reader, _ func(id string) *protocol.Event) error {
	b, err := binform.ReadAll(r)
	if err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	nf, err := decodeFold(b)
	if err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.tasks) != 0 || len(f.names) != 0 {
		return fmt.Errorf("tasks: restore into a fold that is not empty")
	}
	f.tasks, f.order, f.credit, f.creditLog = nf.tasks, nf.order, nf.credit, nf.creditLog
	f.agents, f.names, f.gen = nf.agents, nf.names, nf.gen
	return nil
}

// decodeFold decodes a saved form into a new Fold's state.
func decodeFold(b []byte) (*Fold, error) {
	d := binform.NewReader(b, snapshotVersion)
	nf := New(nil)
	nf.names = d.ReadTable()
	for i, n := range nf.names {
		nf.agents[n] = uint32(i)
	}
	n := d.Count(32 + 7) // id, two flags, five list lengths
	for range n {
		t := decodeTask(d, len(nf.names))
		if d.Err() != nil {
			return nil, d.Err()
		}
		if _, dup := nf.tasks[t.id]; dup {
			return nil, fmt.Errorf("%w: task %x twice", binform.ErrCorrupt, t.id)
		}
		nf.tasks[t.id] = t
		if t.request != nil {
			nf.order = append(nf.order, t)
		}
		if t.inCredit {
			nf.credit = append(nf.credit, t)
		}
		nf.gen++
		t.gen = nf.gen
		if t.inCredit {
			nf.creditLog = append(nf.creditLog, logEntry{t.gen, t})
		}
	}
	if err := d.Done(); err != nil {
		return nil, err
	}
	slices.SortFunc(nf.order, func(a, b *task) int {
		if taskLess(a, b) {
			return -1
		}
		return 1
	})
	return nf, nil
}

func decodeTask(d *binform.Reader, agents int) *task {
	t := &task{}
	copy(t.id[:], d.Raw(32))
	t.inCredit = d.Bool()
	if d.Bool() {
		t.req = decodeRec(d, protocol.KindTaskRequest, agents, false)
		t.req.id = t.id
		if t.req.valid {
			t.request = t.req.parsed.(*protocol.TaskRequest)
		}
	}
	for k := range t.lists {
		n := d.Count(32 + 3)
		l := make([]*rec, 0, n)
		for range n {
			r := decodeRec(d, int64(k)+protocol.KindTaskAccept, agents, true)
			if d.Err() != nil {
				return t
			}
			if len(l) > 0 && !recLess(l[len(l)-1], r) {
				d.Fail("records of task %x out of order or twice", t.id)
				return t
			}
			l = append(l, r)
		}
		t.lists[k] = l
	}
	return t
}

func decodeRec(d *binform.Reader, kind int64, agents int, withID bool) *rec {
	r := &rec{kind: int8(kind)}
	if withID {
		copy(r.id[:], d.Raw(32))
	}
	r.at = d.Varint()
	r.agent = uint32(d.Index(agents))
	r.valid = d.Bool()
	if !r.valid {
		r.invalid = d.Shared()
		return r
	}
	switch kind {
	case protocol.KindTaskRequest:
		p := &protocol.TaskRequest{Capability: d.Shared(), CapAlias: d.Bool(), Deadline: d.Varint(),
			MaxCostUSD: d.String(), HighStakes: d.Bool()}
		p.Reward = protocol.TaskReward{Currency: d.Shared(), Amount: d.Shared(), PaymentMethod: d.Shared(),
			EscrowMethod: d.Shared(), Credits: d.Varint()}
		p.Constraints = readRawJSON(d)
		p.RewardJSON = readRawJSON(d)
		r.parsed = p
	case protocol.KindTaskAccept:
		p := &protocol.TaskAccept{HasQuote: d.Bool()}
		p.PriceQuote = protocol.PriceQuote{Currency: d.Shared(), Amount: d.Shared()}
		p.EtaUnix = d.Varint()
		r.parsed = p
	case protocol.KindTaskResult:
		r.parsed = &protocol.TaskResult{OutputFormat: d.Shared(), AcceptID: d.String()}
	case protocol.KindTaskVerify:
		r.parsed = &protocol.TaskVerify{Verdict: d.Shared(), HasScore: d.Bool(), Score: d.Float64()}
	case protocol.KindPayment:
		r.parsed = &protocol.TaskPayment{Disposition: d.Shared(), PaymentMethod: d.Shared(), Amount: d.Shared(),
			Currency: d.Shared(), TxHash: d.String(), PaymentProofURL: d.String()}
	case protocol.KindTaskCancel:
		r.parsed = &protocol.TaskCancel{Reason: d.String()}
	}
	return r
}
