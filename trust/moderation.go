package trust

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/trust/sortedtab"
)

// ModerationOptions tune the Moderation view's publication.
type ModerationOptions struct {
	Options
	// OnPublish, when set, is called with every newly published snapshot
	// (its Changed lists the visibility changes since the previous one), on
	// the goroutine that refreshed. It must not block for long.
	OnPublish func(*ModSnapshot)
}

// flagRec is one kind 7 flag on one target event.
type flagRec struct {
	id        string
	flagger   int32
	createdAt int64
	category  string
	reason    string
	override  bool    // category "override" or tag ["override", "true"]
	appeal    bool    // category "appeal" or tag ["appeal", "true"]
	cosigners []int32 // distinct ["cosign", <agent_id>] tags, flagger excluded
	// signed are the cosigners whose ["cosign", agent_id, sig] verifies
	// over the flag's kind and content (§1.8, seed §7.5 "same as on kind
	// 12"); they count without an override of their own.
	signed []int32
}

func (a *flagRec) cmp(b *flagRec) int {
	if a.createdAt != b.createdAt {
		if a.createdAt < b.createdAt {
			return -1
		}
		return 1
	}
	return strings.Compare(a.id, b.id)
}

// idKey is the first 128 bits of an event id: collision-free in practice at
// a quarter of the memory of the hex string.
type idKey [16]byte

func keyOf(id string) idKey {
	var k idKey
	if len(id) >= 32 {
		if _, err := hex.Decode(k[:], []byte(id[:32])); err == nil {
			return k
		}
	}
	sum := sha256.Sum256([]byte(id))
	copy(k[:], sum[:])
	return k
}

func cmpKey(a, b idKey) int { return bytes.Compare(a[:], b[:]) }

// newEventTable returns an empty table of live events: 20 bytes an event
// in sorted arrays (16 of key, 4 of author) instead of a map's ~60.
func newEventTable() *sortedtab.Table[idKey, int32] {
	return sortedtab.New[idKey, int32](cmpKey, keyPrefix)
}

func keyPrefix(k idKey) uint64 { return binary.BigEndian.Uint64(k[:8]) }

// Moderation is the §7 visibility view: it folds kind 7 flags, and every
// event's (id, agent_id, created_at) for target authors and the active-agent
// count, and derives visibility with the weights of a Graph. It is safe for
// one writer (Add, Remove) and many readers.
type Moderation struct {
	g    *Graph
	opts ModerationOptions

	mu          sync.RWMutex
	agents      agentTable
	events      *sortedtab.Table[idKey, int32] // every live event → its author
	activity    [][]int64                      // per agent: sorted created_at of its live events
	targets     map[string][]flagRec
	version     atomic.Uint64 // every change
	flagVersion atomic.Uint64 // changes to flags only

	snap       atomic.Pointer[ModSnapshot]
	refreshMu  sync.Mutex
	refreshing atomic.Bool
	lastStart  atomic.Int64
}

// NewModeration returns an empty moderation view weighing flaggers with g.
// Both views must be fed the same events.
func NewModeration(g *Graph, opts ModerationOptions) *Moderation {
	opts.Options = opts.Options.withDefaults()
	return &Moderation{g: g, opts: opts, agents: newAgentTable(),
		events: newEventTable(), targets: make(map[string][]flagRec)}
}

// Version counts the changes folded in so far.
func (m *Moderation) Version() uint64 { return m.version.Load() }

// Add folds an event in: every kind counts toward its author's activity and
// names the author of flags on it; kind 7 flags (valid content, one per
// distinct 64-hex e tag) are kept for aggregation. A second Add of the same
// id is ignored.
func (m *Moderation) Add(ev *protocol.Event) {
	k := keyOf(ev.ID)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.events.Get(k); dup {
		return
	}
	a := m.agents.intern(ev.AgentID)
	m.events.Put(k, a)
	for len(m.activity) <= int(a) {
		m.activity = append(m.activity, nil)
	}
	times := m.activity[a]
	i, _ := slices.BinarySearch(times, ev.CreatedAt)
	m.activity[a] = slices.Insert(times, i, ev.CreatedAt)
	_, flagged := m.targets[ev.ID] // its author is now known
	if ev.Kind == protocol.KindFlag && m.addFlag(ev, a) || flagged {
		m.flagVersion.Add(1)
	}
	m.version.Add(1)
}

func (m *Moderation) addFlag(ev *protocol.Event, flagger int32) bool {
	category, reason, err := protocol.ParseFlag(ev.Content)
	targets := distinctHex(ev.TagValues("e"), "")
	if err != nil || len(targets) == 0 {
		return false
	}
	rec := flagRec{id: strings.Clone(ev.ID), flagger: flagger, createdAt: ev.CreatedAt,
		category: canonicalCategory(category), reason: truncateRunes(reason, MaxReasonRunes),
		override: category == "override" || hasTrueTag(ev, "override"),
		appeal:   category == "appeal" || hasTrueTag(ev, "appeal")}
	for _, c := range distinctHex(ev.TagValues("cosign"), ev.AgentID) {
		rec.cosigners = append(rec.cosigners, m.agents.intern(c))
	}
	if rec.override && !rec.appeal {
		for _, c := range protocol.Cosignatures(ev) {
			if c.Valid && c.AgentID != ev.AgentID {
				rec.signed = append(rec.signed, m.agents.intern(c.AgentID))
			}
		}
	}
	for _, t := range targets {
		if _, ok := m.targets[t]; !ok {
			t = strings.Clone(t)
		}
		m.targets[t] = append(m.targets[t], rec)
	}
	return true
}

// Remove withdraws a previously added event (revoked with kind 9); unknown
// events are ignored.
func (m *Moderation) Remove(ev *protocol.Event) {
	k := keyOf(ev.ID)
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.events.Get(k)
	if !ok {
		return
	}
	m.events.Delete(k)
	if i, found := slices.BinarySearch(m.activity[a], ev.CreatedAt); found {
		m.activity[a] = slices.Delete(m.activity[a], i, i+1)
	}
	_, flagged := m.targets[ev.ID]
	if ev.Kind == protocol.KindFlag {
		for _, t := range distinctHex(ev.TagValues("e"), "") {
			m.removeFlag(t, ev.ID)
		}
	}
	if ev.Kind == protocol.KindFlag || flagged {
		m.flagVersion.Add(1)
	}
	m.version.Add(1)
}

// removeFlag drops the flag id from target t, copying the list: snapshots
// being computed may hold the old one.
func (m *Moderation) removeFlag(t, id string) {
	old := m.targets[t]
	i := slices.IndexFunc(old, func(f flagRec) bool { return f.id == id })
	if i < 0 {
		return
	}
	if len(old) == 1 {
		delete(m.targets, t)
		return
	}
	m.targets[t] = append(old[:i:i], old[i+1:]...)
}

// activeAgents counts agents with a live event created in (at − 30 days, at].
func (m *Moderation) activeAgents(at int64) int {
	n := 0
	for _, times := range m.activity {
		i, _ := slices.BinarySearch(times, at-ActiveWindow+1)
		if i < len(times) && times[i] <= at {
			n++
		}
	}
	return n
}

// canonicalCategory returns the package's own copy of a known category, so
// that stored flags keep no reference to event content.
func canonicalCategory(c string) string {
	for _, k := range categories {
		if k == c {
			return k
		}
	}
	return strings.Clone(c)
}

var categories = []string{"spam", "disinfo", "harassment", "injection", "impersonation", "other",
	"appeal", "override", "collusion", "extortion"}

func hasTrueTag(ev *protocol.Event, name string) bool {
	return slices.Contains(ev.TagValues(name), "true")
}

// distinctHex returns the distinct 64-hex values of vals other than except.
func distinctHex(vals []string, except string) []string {
	var out []string
	for _, v := range vals {
		if protocol.IsHex64(v) && v != except && !contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
