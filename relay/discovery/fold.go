// Package discovery is seed §12 as a relay capability: kind 15 beacons,
// kind 8 subscriptions, the citation graph, co-presence, semantic
// neighbours (a hashed bag-of-words embedding) and the personal feed, each
// an incremental fold over the stored events (Add, Remove) read at query
// time with the evaluation time (D5). Subscriptions and citations are
// judgements derived from the set of events and are digested into /state;
// the time-windowed views (active beacons, co-presence, neighbours, feed)
// are evaluated from the fold and now. DMs (kind 3) never enter the fold.
package discovery

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/anp2net/relay/protocol"
)

// Discoverability settings of a profile (seed §12.8).
const (
	Public     = "public"
	TopicOnly  = "topic_only"
	InviteOnly = "invite_only"
)

// Fold is the discovery fold. It is safe for one writer and many readers.
type Fold struct {
	mu       sync.RWMutex
	beacons  map[string]*beacon
	subs     subscriptions
	cites    citations
	ctx      contexts
	emb      embeddings
	profiles map[string][]*protocol.Event // every kind 0 revision, for Remove
	disc     map[string]string            // the latest profile's discoverability, when not public
	caps     map[string][]*protocol.Event // every kind 4 revision
	relays   map[string]int               // non-revoked kind 10 announcements per relay key
	recent   recentIndex                  // the feed's candidates by author and topic
	strs     interner                     // the agents and topics of the in-memory indexes
	// st holds the indexes that grow with the events (store.go): the
	// contexts and the citations.
	st *store
	// invite counts the invite_only agents, read without the lock: while
	// it is 0 the reader rule (§12.8) restricts nothing.
	invite atomic.Int64
}

// New returns an empty Fold whose store is in memory (SQLite's, outside
// the Go heap): a fold that saves no state (tests, replays).
func New() *Fold {
	st, err := openStore("", false)
	if err != nil {
		panic(fmt.Sprintf("discovery: in-memory store: %v", err))
	}
	storeCloser(st)
	return newFold(st)
}

// Open returns a Fold whose store is the file at path (created when
// missing; temp: removed at Close). Its content is used only when Restore
// accepts it: until then the fold reads as empty, and its first event
// empties the file.
func Open(path string, temp bool) (*Fold, error) {
	st, err := openStore(path, temp)
	if err != nil {
		return nil, err
	}
	storeCloser(st)
	return newFold(st), nil
}

func newFold(st *store) *Fold {
	strs := interner{}
	emb := newEmbeddings(strs)
	emb.st = st
	return &Fold{
		beacons: map[string]*beacon{}, subs: newSubscriptions(), cites: citations{st},
		ctx: newContexts(st), emb: emb,
		profiles: map[string][]*protocol.Event{}, disc: map[string]string{}, caps: map[string][]*protocol.Event{},
		relays: map[string]int{}, recent: newRecentIndex(strs), strs: strs, st: st,
	}
}

// OpenStore replaces the store of a fold that has seen no event with the
// file at path (see Open).
func (f *Fold) OpenStore(path string, temp bool) error {
	st, err := openStore(path, temp)
	if err != nil {
		return err
	}
	storeCloser(st)
	f.mu.Lock()
	old := f.st
	f.st, f.cites.st, f.ctx.st, f.emb.st = st, st, st, st
	f.mu.Unlock()
	return old.close()
}

// Close closes the store: what no save committed is rolled back (a
// temporary file is removed). The fold must not be used after.
func (f *Fold) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st.close()
}

// ignored reports whether e stays out of every discovery view: DMs are
// private (§4.3), and moderation, revocation and control kinds are not
// content.
func ignored(e *protocol.Event) bool {
	switch e.Kind {
	case protocol.KindDM, protocol.KindTrustVote, protocol.KindFlag, protocol.KindRevoke,
		protocol.KindHealth, protocol.KindCacheInvalidate, protocol.KindHTTPAuth:
		return true
	}
	return false
}

// Add folds one stored event in.
func (f *Fold) Add(e *protocol.Event) { f.apply(e, true) }

// Remove withdraws a revoked event.
func (f *Fold) Remove(e *protocol.Event) { f.apply(e, false) }

func (f *Fold) apply(e *protocol.Event, add bool) {
	if ignored(e) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st.closed() {
		return
	}
	f.st.check()
	f.applyKind(e, add)
	// Each index below reads e's topics and references: parsed once.
	topics := topicsOf(e)
	topics = f.strs.all(topics)
	var refs map[string][]string
	if mayCite(e) {
		refs = refsOf(e)
	}
	f.cites.apply(e, refs, add)
	f.ctx.apply(e, topics, refs, add)
	f.recent.apply(e, topics, add)
	if isPost(e) {
		f.emb.apply(e, topics, add)
	}
}

// applyKind folds e into the indexes of its own kind: profiles,
// relays, capabilities, beacons and subscriptions.
func (f *Fold) applyKind(e *protocol.Event, add bool) {
	switch e.Kind {
	case protocol.KindProfile:
		before := latest(f.profiles[e.AgentID])
		f.profiles[e.AgentID] = revise(f.profiles[e.AgentID], e, add)
		now := latest(f.profiles[e.AgentID])
		if now == before {
			break // the setting is the latest profile's
		}
		was := f.disc[e.AgentID] == InviteOnly
		if d := parseDiscoverability(now); d != Public {
			f.disc[e.AgentID] = d
		} else {
			delete(f.disc, e.AgentID)
		}
		if is := f.disc[e.AgentID] == InviteOnly; is && !was {
			f.invite.Add(1)
		} else if was && !is {
			f.invite.Add(-1)
		}
	case protocol.KindRelayAnnounce:
		if add {
			f.relays[e.AgentID]++
		} else if f.relays[e.AgentID]--; f.relays[e.AgentID] <= 0 {
			delete(f.relays, e.AgentID)
		}
	case protocol.KindCapability:
		old := capNames(latest(f.caps[e.AgentID]))
		f.caps[e.AgentID] = revise(f.caps[e.AgentID], e, add)
		f.ctx.setCaps(e.AgentID, old, capNames(latest(f.caps[e.AgentID])))
	case protocol.KindBeacon:
		f.foldBeacon(e, add)
	case protocol.KindSubscribe:
		f.subs.apply(e, add)
	}
}

// revise adds e to or removes it from an agent's revisions of one kind.
func revise(list []*protocol.Event, e *protocol.Event, add bool) []*protocol.Event {
	if add {
		if slices.ContainsFunc(list, func(x *protocol.Event) bool { return x.ID == e.ID }) {
			return list
		}
		return append(list, e)
	}
	return slices.DeleteFunc(list, func(x *protocol.Event) bool { return x.ID == e.ID })
}

// newer reports whether a comes after b in the (created_at, id) order.
func newer(a, b *protocol.Event) bool {
	return a.CreatedAt > b.CreatedAt || a.CreatedAt == b.CreatedAt && a.ID > b.ID
}

// latest is the newest event of list by (created_at, id), or nil.
func latest(list []*protocol.Event) *protocol.Event {
	var best *protocol.Event
	for _, e := range list {
		if best == nil || newer(e, best) {
			best = e
		}
	}
	return best
}

// Discoverability is agent's setting from its latest profile (§12.8):
// public, topic_only or invite_only; anything else, or no profile, is
// public.
func (f *Fold) Discoverability(agent string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.discoverability(agent)
}

func (f *Fold) discoverability(agent string) string {
	if d, ok := f.disc[agent]; ok {
		return d
	}
	return Public
}

// ReaderRule is the §12.8 rule for every read path (relay.ReaderRule):
// nil while no agent is invite_only, else MaySee.
func (f *Fold) ReaderRule() func(reader, author string) bool {
	if f.invite.Load() == 0 {
		return nil
	}
	return f.MaySee
}

// MaySee reports whether reader ("" for anonymous) may see author's events
// (§12.8): always unless author is invite_only; then only author itself,
// the agents it currently follows, and relays (the authors of a
// non-revoked kind 10 announcement), which mirror the log and apply the
// rule to their own readers.
func (f *Fold) MaySee(reader, author string) bool {
	if reader == author {
		return true
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.disc[author] != InviteOnly || reader != "" && (f.follows(author, reader) || f.relays[reader] > 0)
}

// parseDiscoverability reads a profile's discoverability (public when p is
// nil or says anything else).
func parseDiscoverability(p *protocol.Event) string {
	if p == nil || !mayNameDiscoverability(p.Content) {
		return Public
	}
	var body struct {
		Discoverability any `json:"discoverability"`
	}
	json.Unmarshal([]byte(p.Content), &body)
	switch body.Discoverability {
	case TopicOnly, InviteOnly:
		return body.Discoverability.(string)
	}
	return Public
}

// mayNameDiscoverability reports whether content may hold a key that
// encoding/json matches to "discoverability" (any case; Unicode folds
// such as ſ for s; escapes): always, unless content is ASCII without a
// backslash and without that word in any case.
func mayNameDiscoverability(content string) bool {
	const key = "discoverability"
	for i := 0; i < len(content); i++ {
		switch c := content[i]; {
		case c >= utf8.RuneSelf || c == '\\':
			return true
		case c|0x20 == 'd' && len(content)-i >= len(key) && strings.EqualFold(content[i:i+len(key)], key):
			return true
		}
	}
	return false
}

// capNames is protocol.CapabilityNames.
func capNames(e *protocol.Event) []string { return protocol.CapabilityNames(e) }

// topicsOf returns e's distinct non-empty t tag values.
func topicsOf(e *protocol.Event) []string {
	var out []string
	for _, t := range e.Tags {
		if len(t) >= 2 && t[0] == "t" && t[1] != "" && !slices.Contains(out, t[1]) {
			out = append(out, t[1])
		}
	}
	return out
}

// isPost reports whether e is text an agent published: a post, a reply or
// a knowledge claim (the input of the neighbour embedding, §12.3).
func isPost(e *protocol.Event) bool {
	return e.Kind == protocol.KindPost || e.Kind == protocol.KindReply || e.Kind == protocol.KindKnowledge
}
