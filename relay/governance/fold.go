package governance

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/state"
)

// Fold is governance's pure part: the governance events (kinds 20, 21, 30,
// 31), the events of the sovereign keys (their activity) and the use of
// schema names, from which every judgement and effect is derived on
// demand. It
// depends only on the set of events, the Options and the evaluation time
// (D6), so a relay, a mirror and `anp2 replay` agree.
type Fold struct {
	opts Options

	mu      sync.Mutex
	events  map[string]*protocol.Event // kinds 21, 30 and 31
	version uint64
	// activity holds the events by configured sovereign keys: key → id →
	// created_at (the dead-man switch measures their dormancy).
	activity map[string]map[string]int64
	// judged caches judge's answer for version.
	judgedAt uint64
	j        *judgement
	// signed caches each act's signature checks; sov caches the sovereign
	// state of the latest (version, at) asked (the gate asks per publish).
	signed map[string]*signed
	sov    *Sovereign
	sovVer uint64

	pips  *pipSet
	usage usage
}

var (
	_ state.Fold     = (*Fold)(nil)
	_ state.Digester = (*Fold)(nil)
)

// NewFold returns an empty fold under opts (already normalized).
func NewFold(opts Options) *Fold {
	return &Fold{opts: opts, events: map[string]*protocol.Event{}, activity: map[string]map[string]int64{},
		judgedAt: ^uint64(0), pips: newPipSet(), signed: map[string]*signed{}}
}

// Add folds one stored, non-revoked event.
func (f *Fold) Add(e *protocol.Event) {
	f.usage.add(e)
	if slices.Contains(f.opts.SovereignKeys, e.AgentID) {
		f.mu.Lock()
		if f.activity[e.AgentID] == nil {
			f.activity[e.AgentID] = map[string]int64{}
		}
		f.activity[e.AgentID][e.ID] = e.CreatedAt
		f.version++
		f.mu.Unlock()
	}
	switch e.Kind {
	case KindSovereignAct, KindSeedDestruct, KindDeadMan:
		f.mu.Lock()
		if _, ok := f.events[e.ID]; !ok {
			f.events[e.ID] = e
			f.version++
		}
		f.mu.Unlock()
	case KindPIP, protocol.KindReply:
		f.pips.add(e)
	}
}

// Remove withdraws an event its author revoked.
func (f *Fold) Remove(e *protocol.Event) {
	f.usage.remove(e)
	if m := f.activity[e.AgentID]; m != nil {
		f.mu.Lock()
		delete(m, e.ID)
		f.version++
		f.mu.Unlock()
	}
	switch e.Kind {
	case KindSovereignAct, KindSeedDestruct, KindDeadMan:
		f.mu.Lock()
		if _, ok := f.events[e.ID]; ok {
			delete(f.events, e.ID)
			delete(f.signed, e.ID)
			f.version++
		}
		f.mu.Unlock()
	case KindPIP, protocol.KindReply:
		f.pips.remove(e)
	}
}

// Usage returns every schema name's use by stored events, by name.
func (f *Fold) Usage() []Usage { return f.usage.all() }

// judged returns the current judgement (shared: callers must not change
// it).
func (f *Fold) judged() *judgement {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.judgedAt != f.version {
		evs := make([]*protocol.Event, 0, len(f.events))
		for _, e := range f.events {
			evs = append(evs, e)
		}
		activity := make(map[string][]int64, len(f.activity))
		for k, m := range f.activity {
			for _, at := range m {
				activity[k] = append(activity[k], at)
			}
		}
		f.j = f.opts.judgeCached(evs, activity, f.signed)
		f.judgedAt = f.version
	}
	return f.j
}

// Log returns every governance act (kinds 21, 30 and 31) with its
// judgement, oldest first (GET /sovereign_log).
func (f *Fold) Log() []*Act { return f.judged().acts }

// Sovereign returns the sovereign state at unix time at (shared: callers
// must not change it).
func (f *Fold) Sovereign(at int64) *Sovereign {
	j := f.judged()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sov != nil && f.sovVer == f.judgedAt && f.sov.At == at && f.j == j {
		return f.sov
	}
	s := f.opts.sovereignAt(j, at)
	if f.j == j {
		f.sov, f.sovVer = s, f.judgedAt
	}
	return s
}

// Authorized reports whether e, a kind 21, 30 or 31, is signed under the
// rule in force now (the gate lets such events through a freeze): the
// sovereign or seed threshold, or for a kind 31 the stewards'.
func (f *Fold) Authorized(e *protocol.Event, now int64) bool {
	j := f.judged()
	rg := j.finalAt(now)
	rg.SeedActive = rg.SeedActive && (j.destroyed == 0 || e.CreatedAt < j.destroyed)
	who, _, _ := f.opts.signers(e)
	if e.Kind == KindDeadMan {
		return len(rg.Stewards) > 0 && len(among(who, rg.Stewards)) >= rg.StewardThreshold
	}
	return f.opts.authority(among(who, rg.SovKeys), among(who, f.opts.SeedKeys), &rg) != ""
}

// Options returns the fold's settings.
func (f *Fold) Options() Options { return f.opts }

// digestDoc is what Digest hashes.
type digestDoc struct {
	Version string      `json:"version"`
	Options Options     `json:"options"`
	Acts    []digestAct `json:"acts"`
	State   *Sovereign  `json:"state"`
	PIPs    []pipDigest `json:"pips"`
	Usage   []Usage     `json:"schema_usage"`
}

type digestAct struct {
	ID        string `json:"id"`
	Valid     bool   `json:"valid"`
	Ignored   string `json:"ignored"`
	Authority string `json:"authority"`
}

// Digest hashes the governance state at at: the options, every act's
// judgement, the sovereign state, and the PIPs' trust-independent record
// (SPEC §10.6). encoding/json writes struct fields in declaration order
// and these slices are sorted, so the bytes depend only on the set of
// events, the options and at.
func (f *Fold) Digest(at int64) [32]byte {
	j := f.judged()
	doc := digestDoc{Version: "governance.v1", Options: f.opts, State: f.opts.sovereignAt(j, at), Acts: []digestAct{}}
	for _, a := range j.acts {
		doc.Acts = append(doc.Acts, digestAct{a.ID, a.Valid, a.Ignored, a.Authority})
	}
	doc.PIPs = f.pips.digest(at)
	doc.Usage = f.usage.all()
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	return sha256.Sum256(append([]byte("anp2-governance.v1\x00"), b...))
}
