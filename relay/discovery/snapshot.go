package discovery

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/state"
)

var _ state.Capturer = (*Fold)(nil)

// snapshotVersion names the Fold's saved form (SPEC §2.2): the feed
// index's horizon, then every event the fold holds in (created_at, id)
// order, in binary — kind, created_at, id, agent_id, sig, content and
// tags — with short lowercase hex (ids, keys, signatures) as its bytes. Restore
// folds them into a fresh Fold: no JSON to decode and no log to read.
const snapshotVersion = "discovery.events/1"

// SnapshotVersion names the Fold's saved form.
func (f *Fold) SnapshotVersion() string { return snapshotVersion }

// keptWhole reports whether the fold keeps events of kind k themselves
// (profiles, capabilities, beacons, subscriptions), signature included:
// their saved form is the event; of the others it drops the signature,
// which no discovery answer carries.
func keptWhole(k int64) bool {
	switch k {
	case protocol.KindProfile, protocol.KindCapability, protocol.KindBeacon, protocol.KindSubscribe:
		return true
	}
	return false
}

// heldEvent is a held event as its saved form needs it. Holding the
// encoded tail (signature, content, tags) rather than the parsed event
// lets the event's content and tag slices, which no index reads, be
// collected; the author string is the one the indexes share.
type heldEvent struct {
	at, kind int64
	agent    string
	rest     []byte // appendRest
}

// hold records e as folded in (add) or withdrawn. Callers hold mu.
func (f *Fold) hold(e *protocol.Event, add bool) {
	if !add {
		delete(f.held, e.ID)
		return
	}
	f.scratch = appendRest(f.scratch[:0], e)
	f.held[e.ID] = heldEvent{e.CreatedAt, e.Kind, e.AgentID, bytes.Clone(f.scratch)}
}

// appendRest appends the end of e's saved form: the signature for the
// kinds kept whole (else an empty one), content and tags.
func appendRest(b []byte, e *protocol.Event) []byte {
	sig := ""
	if keptWhole(e.Kind) {
		sig = e.Sig
	}
	b = appendText(b, sig)
	b = appendText(b, e.Content)
	b = binary.AppendUvarint(b, uint64(len(e.Tags)))
	for _, t := range e.Tags {
		b = binary.AppendUvarint(b, uint64(len(t)))
		for _, s := range t {
			b = appendText(b, s)
		}
	}
	return b
}

// Snapshot writes the horizon and every held event to w.
func (f *Fold) Snapshot(w io.Writer) error { return f.CaptureSnapshot()(w) }

// CaptureSnapshot copies the horizon and the set of held events (their
// saved forms are never changed once held) and returns the function that
// encodes them: it may run while events are added and removed.
func (f *Fold) CaptureSnapshot() func(w io.Writer) error {
	f.mu.RLock()
	evs := make([]heldID, 0, len(f.held))
	for id, h := range f.held {
		evs = append(evs, heldID{id, h})
	}
	horizon := f.recent.horizon
	f.mu.RUnlock()
	return func(w io.Writer) error { return encodeHeld(w, horizon, evs) }
}

// heldID is a held event and its id.
type heldID struct {
	id string
	heldEvent
}

// encodeHeld writes the horizon and evs, sorted in place, to w.
func encodeHeld(w io.Writer, horizon int64, evs []heldID) error {
	// Folding in time order at restore appends to the time-ordered
	// indexes instead of inserting into them.
	slices.SortFunc(evs, func(a, b heldID) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.id, b.id))
	})
	b := binary.AppendVarint(nil, horizon)
	b = binary.AppendUvarint(b, uint64(len(evs)))
	for _, e := range evs {
		b = binary.AppendVarint(b, e.kind)
		b = binary.AppendVarint(b, e.at)
		b = appendText(b, e.id)
		b = appendText(b, e.agent)
		b = append(b, e.rest...)
		if len(b) >= 1<<20 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	_, err := w.Write(b)
	return err
}

// appendText appends s: a uvarint 2n+1 and n bytes for lowercase hex of
// even length n×2 up to 128 (ids, keys, signatures: their bytes), else
// 2×len(s) and s.
func appendText(b []byte, s string) []byte {
	if len(s) > 0 && len(s) <= 128 && len(s)%2 == 0 && isLowerHex(s) {
		b = binary.AppendUvarint(b, uint64(len(s)/2)<<1|1)
		n := len(b)
		b = append(b, make([]byte, len(s)/2)...)
		hex.Decode(b[n:], []byte(s))
		return b
	}
	b = binary.AppendUvarint(b, uint64(len(s))<<1)
	return append(b, s...)
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

var errSaved = errors.New("discovery: damaged saved form")

// savedReader reads what Snapshot wrote, failing on anything it could not
// have written.
type savedReader struct {
	b   []byte
	err error
	// intern shares the strings that recur (agents, tag names, topics).
	intern map[string]string
}

func (r *savedReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errSaved
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *savedReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errSaved
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a number of items, each at least one byte long.
func (r *savedReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err = errSaved
		return 0
	}
	return int(n)
}

// text reads one appendText; interned ones are shared.
func (r *savedReader) text(interned bool) string {
	h := r.uvarint()
	n := h >> 1
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errSaved
		return ""
	}
	raw := r.b[:n]
	r.b = r.b[n:]
	if interned && h&1 == 0 {
		if s, ok := r.intern[string(raw)]; ok {
			return s
		}
	}
	var s string
	if h&1 == 1 {
		s = hex.EncodeToString(raw)
	} else {
		s = string(raw)
	}
	if interned && h&1 == 0 {
		r.intern[s] = s
	}
	return s
}

// Restore replaces f's state with the fold of the events Snapshot wrote;
// the saved events are checked for the shape every stored event has. On
// an error f is unchanged.
func (f *Fold) Restore(rd io.Reader, _ func(id string) *protocol.Event) error {
	data, err := io.ReadAll(rd)
	if err != nil {
		return err
	}
	r := &savedReader{b: data, intern: map[string]string{}}
	agents := map[string]string{}
	horizon := r.varint()
	n := r.count()
	evs := make([]*protocol.Event, 0, n)
	rests := make([][2]int, 0, n) // each event's appendRest, as offsets in data
	for range n {
		e := &protocol.Event{Kind: r.varint(), CreatedAt: r.varint(), ID: r.text(false)}
		agent := r.text(false)
		if a, ok := agents[agent]; ok {
			agent = a
		} else {
			agents[agent] = agent
		}
		start := len(data) - len(r.b)
		e.AgentID, e.Sig, e.Content = agent, r.text(false), r.text(false)
		if nt := r.count(); nt > 0 {
			e.Tags = make([][]string, nt)
			for i := range e.Tags {
				t := make([]string, r.count())
				for j := range t {
					// Tag names and topics recur.
					t[j] = r.text(j == 0 || j == 1 && t[0] == "t")
				}
				e.Tags[i] = t
			}
		}
		if r.err != nil {
			return r.err
		}
		if !protocol.IsHex64(e.ID) || !protocol.IsHex64(e.AgentID) || ignored(e) ||
			e.CreatedAt < 0 || e.CreatedAt > protocol.MaxSafeInteger || e.Kind < 0 || e.Kind > protocol.MaxSafeInteger {
			return fmt.Errorf("%w: event %d", errSaved, len(evs))
		}
		evs = append(evs, e)
		rests = append(rests, [2]int{start, len(data) - len(r.b)})
	}
	if r.err != nil || len(r.b) != 0 {
		return errSaved
	}
	g := New()
	g.replay(evs)
	g.recent.horizon, g.held = horizon, heldOf(evs, rests, data)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beacons, f.subs, f.cites, f.ctx, f.emb = g.beacons, g.subs, g.cites, g.ctx, g.emb
	f.profiles, f.disc, f.caps, f.relays, f.recent, f.held = g.profiles, g.disc, g.caps, g.relays, g.recent, g.held
	f.invite.Store(g.invite.Load())
	return nil
}

// heldOf returns the held form of evs, whose appendRest bytes are at
// rests in data: copied into one buffer, so that data can be collected.
func heldOf(evs []*protocol.Event, rests [][2]int, data []byte) map[string]heldEvent {
	n := 0
	for _, r := range rests {
		n += r[1] - r[0]
	}
	buf := make([]byte, 0, n)
	held := make(map[string]heldEvent, len(evs))
	for i, e := range evs {
		k := len(buf)
		buf = append(buf, data[rests[i][0]:rests[i][1]]...)
		held[e.ID] = heldEvent{e.CreatedAt, e.Kind, e.AgentID, buf[k:len(buf):len(buf)]}
	}
	return held
}

// replay folds evs into g, which no one else sees yet, as Add would. The
// indexes share nothing but the events, so the thread, topic and citation
// contexts, the neighbour embedding and the feed index are built on
// goroutines of their own (a capability's change of an agent's contexts,
// setCaps, touches only its own two maps).
func (g *Fold) replay(evs []*protocol.Event) {
	var wg sync.WaitGroup
	each := func(fn func(e *protocol.Event)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, e := range evs {
				fn(e)
			}
		}()
	}
	each(func(e *protocol.Event) {
		if isPost(e) {
			g.emb.apply(e, topicsOf(e), true)
		}
	})
	each(func(e *protocol.Event) {
		if feedKind(e.Kind) {
			g.recent.apply(e, topicsOf(e), true)
		}
	})
	each(func(e *protocol.Event) {
		var refs map[string][]string
		if mayCite(e) {
			refs = refsOf(e)
		}
		g.ctx.apply(e, topicsOf(e), refs, true)
	})
	for _, e := range evs {
		g.applyKind(e, true)
		if mayCite(e) {
			g.cites.apply(e, refsOf(e), true)
		} else {
			g.cites.apply(e, nil, true)
		}
	}
	wg.Wait()
}
