package governance

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/anp2net/relay/protocol"
)

// PIP statuses (seed §14.1). An author declares draft, discussion,
// final-call and withdrawn; accepted and rejected are derived.
const (
	StatusDraft      = "draft"
	StatusDiscussion = "discussion"
	StatusFinalCall  = "final-call"
	StatusWithdrawn  = "withdrawn"
	StatusAccepted   = "accepted"
	StatusRejected   = "rejected"
)

// PIP rules (SPEC §10.7).
const (
	MinDiscussion    = 14 * 86400 // seconds in discussion before acceptance
	FinalCallPeriod  = 7 * 86400  // seconds of final call before rejection
	ApprovalFraction = 0.75       // of the total trusted weight
	maxPIPNumber     = 64         // bytes of a pip_number
)

// Reasons a kind 20 does not move its proposal (Transition.Ignored).
const (
	WhyNotOwner      = "not_owner"      // another author's copy: an endorsement at most
	WhySelfDeclared  = "self_declared"  // accepted and rejected are derived, never declared
	WhyUnknownStatus = "unknown_status" // a status tag that is none of §14.1's
)

// pipContent is a kind 20's content as the fold reads it.
type pipContent struct {
	Number        string
	Title         string
	ReferenceImpl string
	Schemas       map[string]json.RawMessage
	Vocab         map[string]json.RawMessage
	fields        map[string]any
}

// parsePIP reads a kind 20's content: a JSON object with a non-empty
// string pip_number of at most 64 bytes (an integer n is read as its
// decimal string).
func parsePIP(content string) (*pipContent, bool) {
	var m map[string]any
	if json.Unmarshal([]byte(content), &m) != nil {
		return nil, false
	}
	p := &pipContent{fields: m}
	switch n := m["pip_number"].(type) {
	case string:
		p.Number = n
	case float64:
		if n != math.Trunc(n) || n < 0 || n > 1<<53 {
			return nil, false
		}
		p.Number = strconv.FormatInt(int64(n), 10)
	}
	if p.Number == "" || len(p.Number) > maxPIPNumber {
		return nil, false
	}
	p.Title, _ = m["title"].(string)
	p.ReferenceImpl, _ = m["reference_impl"].(string)
	var ext struct {
		Schemas map[string]json.RawMessage `json:"schemas"`
		Vocab   map[string]json.RawMessage `json:"vocab"`
	}
	if json.Unmarshal([]byte(content), &ext) == nil {
		p.Schemas, p.Vocab = ext.Schemas, ext.Vocab
	}
	return p, true
}

// pipEvent is a stored kind 20 with its parsed content.
type pipEvent struct {
	e      *protocol.Event
	c      *pipContent
	digest [32]byte
	// cosigners are the valid cosigners, verified once when added.
	cosigners []string
}

// pipSet holds the kind 20 proposals by number.
type pipSet struct {
	mu     sync.Mutex
	byNum  map[string]map[string]*pipEvent // number → id → event
	broken map[string]*protocol.Event      // kind 20s without a readable number
}

func newPipSet() *pipSet {
	return &pipSet{byNum: map[string]map[string]*pipEvent{}, broken: map[string]*protocol.Event{}}
}

func (p *pipSet) add(e *protocol.Event) {
	c, ok := parsePIP(e.Content)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !ok {
		p.broken[e.ID] = e
		return
	}
	d, _ := protocol.CosignDigest(KindPIP, e.Content)
	pe := &pipEvent{e: e, c: c, digest: d}
	for _, cs := range protocol.Cosignatures(e) {
		if cs.Valid {
			pe.cosigners = append(pe.cosigners, cs.AgentID)
		}
	}
	if p.byNum[c.Number] == nil {
		p.byNum[c.Number] = map[string]*pipEvent{}
	}
	p.byNum[c.Number][e.ID] = pe
}

func (p *pipSet) remove(e *protocol.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.broken, e.ID)
	if c, ok := parsePIP(e.Content); ok {
		delete(p.byNum[c.Number], e.ID)
		if len(p.byNum[c.Number]) == 0 {
			delete(p.byNum, c.Number)
		}
	}
}

// Transition is one kind 20 of a proposal's history.
type Transition struct {
	EventID string `json:"event_id"`
	Author  string `json:"agent_id"`
	At      int64  `json:"at"`
	Status  string `json:"status"`
	// Counted is true when the event moved the proposal; otherwise
	// Ignored says why.
	Counted bool   `json:"counted"`
	Ignored string `json:"ignored,omitempty"`
}

// Record is a proposal's trust-independent derivation: who owns it, what
// its author declared, since when, and who supports its current content.
type Record struct {
	Number  string `json:"pip_number"`
	Owner   string `json:"author"`
	Created int64  `json:"created_at"`
	// Declared is the latest counted status of the owner.
	Declared string `json:"declared_status"`
	// DiscussionSince starts the current run of discussion and final
	// call (0: not in discussion); FinalCallSince the current final call.
	DiscussionSince int64 `json:"discussion_since,omitempty"`
	FinalCallSince  int64 `json:"final_call_since,omitempty"`
	// Current is the owner's latest event; ContentDigest its cosign digest.
	Current       string `json:"current_event"`
	ContentDigest string `json:"content_digest"`
	Title         string `json:"title"`
	ReferenceImpl string `json:"reference_impl"`
	// Supporters endorse the current content: the owner, the authors of
	// other kind 20s with the same content, and the valid cosigners of
	// any of them; sorted.
	Supporters []string     `json:"supporters"`
	History    []Transition `json:"history"`
	// EventIDs are every kind 20 of this number (the thread's roots).
	EventIDs []string `json:"-"`

	content *pipContent
}

// records derives every proposal's Record, by number.
func (p *pipSet) records() []*Record {
	p.mu.Lock()
	groups := make(map[string][]*pipEvent, len(p.byNum))
	for n, m := range p.byNum {
		for _, pe := range m {
			groups[n] = append(groups[n], pe)
		}
	}
	p.mu.Unlock()
	out := make([]*Record, 0, len(groups))
	for n, evs := range groups {
		out = append(out, derive(n, evs))
	}
	slices.SortFunc(out, func(a, b *Record) int { return compareNumbers(a.Number, b.Number) })
	return out
}

// compareNumbers orders pip numbers by length then bytes, so PIP-2 comes
// before PIP-10.
func compareNumbers(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}

// derive builds one proposal's Record from its events.
func derive(number string, evs []*pipEvent) *Record {
	slices.SortFunc(evs, func(a, b *pipEvent) int { return byTime(a.e, b.e) })
	owner := evs[0].e.AgentID
	r := &Record{Number: number, Owner: owner, Created: evs[0].e.CreatedAt, Declared: StatusDraft, History: []Transition{}, Supporters: []string{}}
	var cur *pipEvent
	for _, pe := range evs {
		r.EventIDs = append(r.EventIDs, pe.e.ID)
		t := Transition{EventID: pe.e.ID, Author: pe.e.AgentID, At: pe.e.CreatedAt, Status: pe.e.TagValue("status")}
		if t.Status == "" {
			t.Status = StatusDraft
		}
		switch {
		case pe.e.AgentID != owner:
			t.Ignored = WhyNotOwner
		case t.Status == StatusAccepted || t.Status == StatusRejected:
			t.Ignored = WhySelfDeclared
		case t.Status != StatusDraft && t.Status != StatusDiscussion && t.Status != StatusFinalCall && t.Status != StatusWithdrawn:
			t.Ignored = WhyUnknownStatus
		default:
			t.Counted = true
			r.step(t)
		}
		if pe.e.AgentID == owner {
			cur = pe
		}
		r.History = append(r.History, t)
	}
	r.Current, r.ContentDigest = cur.e.ID, hex.EncodeToString(cur.digest[:])
	r.Title, r.ReferenceImpl, r.content = cur.c.Title, cur.c.ReferenceImpl, cur.c
	r.Supporters = supporters(evs, cur.digest, owner)
	return r
}

// step applies one counted transition of the owner.
func (r *Record) step(t Transition) {
	prev := r.Declared
	r.Declared = t.Status
	switch t.Status {
	case StatusDiscussion:
		if prev != StatusDiscussion && prev != StatusFinalCall {
			r.DiscussionSince = t.At
		}
		r.FinalCallSince = 0
	case StatusFinalCall:
		if prev != StatusDiscussion && prev != StatusFinalCall {
			r.DiscussionSince = t.At
		}
		if prev != StatusFinalCall {
			r.FinalCallSince = t.At
		}
	default:
		r.DiscussionSince, r.FinalCallSince = 0, 0
	}
}

// supporters returns the owner, the authors of kind 20s carrying the
// content with digest d, and their valid cosigners, sorted.
func supporters(evs []*pipEvent, d [32]byte, owner string) []string {
	out := []string{owner}
	for _, pe := range evs {
		if pe.digest != d {
			continue
		}
		out = addAll(out, []string{pe.e.AgentID})
		out = addAll(out, pe.cosigners)
	}
	slices.Sort(out)
	return out
}

// pipDigest is a Record as the governance digest covers it.
type pipDigest struct {
	Number          string   `json:"n"`
	Owner           string   `json:"o"`
	Declared        string   `json:"d"`
	DiscussionSince int64    `json:"ds"`
	FinalCallSince  int64    `json:"fs"`
	Current         string   `json:"c"`
	HasImpl         bool     `json:"i"`
	Supporters      []string `json:"s"`
	Counted         []string `json:"h"`
}

// digest returns every proposal's trust-independent record. Statuses that
// depend on trust weights (accepted, rejected) are computed at query time
// from this record and the trust view, which /state digests on its own.
func (p *pipSet) digest(at int64) []pipDigest {
	out := []pipDigest{}
	for _, r := range p.records() {
		d := pipDigest{Number: r.Number, Owner: r.Owner, Declared: r.Declared, DiscussionSince: r.DiscussionSince,
			FinalCallSince: r.FinalCallSince, Current: r.Current, HasImpl: r.ReferenceImpl != "", Supporters: r.Supporters, Counted: []string{}}
		for _, t := range r.History {
			if t.Counted {
				d.Counted = append(d.Counted, t.EventID)
			}
		}
		out = append(out, d)
	}
	return out
}
