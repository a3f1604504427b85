// Package state composes the relay's derived views — trust, moderation,
// tasks and credit — into one fold over the set of stored events, applies
// revocations to all of them, and digests the result (decisions D6).
//
// The relay feeds it every committed event (Add); an auditor replaying a log
// feeds it the same events in any order and must reach the same Digest.
package state

import (
	"encoding/binary"
	"encoding/hex"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/anp2net/relay/credit"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/trust"
)

// Options configure a State.
type Options struct {
	// Treasury is the credit treasury agent ("" for credit.DefaultTreasury).
	Treasury string
	// Moderation tunes snapshot publication; OnPublish receives every
	// published moderation snapshot (author notices, §7.2).
	Moderation trust.ModerationOptions
	// Trust tunes the trust graph's snapshot publication.
	Trust trust.Options
	// Folds are the registered capability modules' folds (relay.Folder),
	// fed exactly like the built-in views: every stored event that its
	// author has not revoked, and a Remove when a revocation arrives
	// later. A fold that is also a Digester is digested into /state under
	// its name.
	Folds []NamedFold
	// Redactors are the relay keys (agent ids) whose kind 25 redactions
	// count (SPEC §21.8): the relay's own key, and the keys its operator
	// chose to honor. An event a counted redaction names is excluded from
	// every view, as a revoked one is.
	Redactors []string
}

// Fold is a capability's pure part: its state is a function of the set
// of events added minus those removed, in any order (D6).
type Fold interface {
	Add(ev *protocol.Event)
	Remove(ev *protocol.Event)
}

// Digester is a Fold whose state belongs in GET /state: Digest hashes it
// canonically at evaluation time at.
type Digester interface {
	Digest(at int64) [32]byte
}

// Excluder is a Fold that names agents whose votes, flags and weights
// stop counting in every view at an evaluation time (bans): New hands the
// first registered one to the trust graph (trust.Options.Excluded).
type Excluder interface {
	Excluded(at int64) map[string]bool
}

// NamedFold is a registered fold and its module's name (its key among
// /state's views when it is a Digester).
type NamedFold struct {
	Name string
	Fold Fold
}

// Lookup returns a previously added event by id, or nil when it is unknown.
// The relay backs it with its log; a replay that preloads every revocation
// (Preload) may pass nil.
type Lookup func(id string) *protocol.Event

// State is the composition of every derived view. It is safe for one writer
// (Add, Preload) and many readers.
type State struct {
	Trust      *trust.Graph
	Moderation *trust.Moderation
	Tasks      *tasks.Fold
	Credit     *credit.Ledger
	// folds are the registered modules' folds (Options.Folds).
	folds []NamedFold

	mu sync.Mutex
	// revokers maps a target id to the agents whose kind 9 names it; the
	// target is revoked when its author is among them (§4.9), whichever
	// arrives first.
	revokers map[string][]string
	// set fingerprints the stored events: their count and the sum of their
	// ids as 256-bit little-endian integers mod 2^256.
	count int64
	sum   [4]uint64
	// seq is the highest log sequence added, lastID the id of the event
	// added at seq (saved state names the log position by both).
	seq    int64
	lastID string
	// revoked counts the distinct events excluded by a revocation.
	revoked map[string]struct{}
	// revMu guards revoked for readers (Revoked runs per event on the
	// stream's fan-out and must not wait for a fold); writers hold mu too.
	revMu sync.RWMutex
	// redactors are Options.Redactors; withheld maps each event id a
	// counted redaction names, or whose body the log withholds, to why
	// (guarded by mu and revMu like revoked).
	redactors map[string]bool
	withheld  map[string]eventlog.Withholding

	digestMu sync.Mutex
	weights  *trust.Snapshot
	// verifier is the verifier weight at the digest time: weights, and 0
	// for a verifier whose collusion challenge holds (trust.VerifierWeight).
	verifier func(agent string) float64

	// version counts the Add calls completed, bumped after every fold has
	// seen the event (see Version).
	version atomic.Uint64
	// stale is set on a branch's state its keeper no longer keeps current
	// (MarkStale).
	stale atomic.Bool
}

// MarkStale records that s is no longer kept current: the branches module
// marks a preferred branch's state it still serves while a rebuild waits,
// so that checks that must be exact (the PoW bypass's standing) refuse it.
func (s *State) MarkStale() { s.stale.Store(true) }

// Stale reports whether MarkStale was called.
func (s *State) Stale() bool { return s.stale.Load() }

// Version counts the events folded in so far (each Add, revoked or not),
// bumped once every view has seen the event: a reader that read Version
// before reading the views and finds it unchanged afterwards read them
// with no Add since, not even one in progress.
func (s *State) Version() uint64 { return s.version.Load() }

// New returns an empty State.
func New(opts Options) *State {
	s := &State{revokers: make(map[string][]string), revoked: make(map[string]struct{}),
		redactors: make(map[string]bool), withheld: make(map[string]eventlog.Withholding)}
	for _, k := range opts.Redactors {
		s.redactors[k] = true
	}
	for _, f := range opts.Folds {
		if ex, ok := f.Fold.(Excluder); ok && opts.Trust.Excluded == nil {
			opts.Trust.Excluded = ex.Excluded
		}
	}
	s.Trust = trust.NewGraph(opts.Trust)
	s.Moderation = trust.NewModeration(s.Trust, opts.Moderation)
	// The fold's own weight function only serves Digest, which runs under
	// digestMu with s.verifier set to the verifier weight of the digest time.
	s.Tasks = tasks.New(func(agent string) float64 { return s.verifier(agent) })
	s.Credit = credit.New(s.Tasks, opts.Treasury)
	s.folds = opts.Folds
	return s
}

// Preload registers the revocations of a kind 9 event before any event is
// added, so that a fold that sees every revocation first never has to
// withdraw an event (and needs no Lookup). The relay and the replayer use
// lookups instead; the property tests use Preload as the independent second
// path their results must equal. Adding the kind 9 later is still required.
func (s *State) Preload(ev *protocol.Event) {
	if ev.Kind != protocol.KindRevoke {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range revokeTargets(ev) {
		s.addRevoker(t, ev.AgentID)
	}
}

// Add folds one stored event into every view. A revoked event (a kind 9 by
// its own author names it, before or after) is left out; a kind 9 withdraws
// the targets it revokes from every view, fetching them with lookup. Adding
// an id twice counts it twice in the set fingerprint: callers add each
// stored event once. seq is the event's log sequence (any increasing
// number for a replay).
func (s *State) Add(seq int64, ev *protocol.Event, lookup Lookup) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.version.Add(1) // after every fold, before the unlock
	if seq >= s.seq {
		s.seq, s.lastID = seq, ev.ID
	}
	s.count++
	addID(&s.sum, ev.ID)
	if ev.Kind == protocol.KindRevoke {
		for _, t := range revokeTargets(ev) {
			if !s.addRevoker(t, ev.AgentID) || lookup == nil {
				continue
			}
			if target := lookup(t); target != nil && target.AgentID == ev.AgentID {
				if _, done := s.revoked[t]; !done {
					s.markRevoked(t)
					s.remove(target)
				}
			}
		}
	}
	if ev.Kind == protocol.KindRedaction && s.redactors[ev.AgentID] {
		s.addRedaction(ev, lookup)
	}
	if s.isRevoked(ev) {
		s.noteWithheld(ev)
		s.markRevoked(ev.ID)
		return
	}
	s.Trust.Add(ev)
	s.Moderation.Add(ev)
	s.Tasks.Add(ev)
	for _, f := range s.folds {
		f.Fold.Add(ev)
	}
}

func (s *State) remove(ev *protocol.Event) {
	s.Trust.Remove(ev)
	s.Moderation.Remove(ev)
	s.Tasks.Remove(ev)
	for _, f := range s.folds {
		f.Fold.Remove(ev)
	}
}

// addRevoker records that agent revoked target; false when already known.
func (s *State) addRevoker(target, agent string) bool {
	for _, a := range s.revokers[target] {
		if a == agent {
			return false
		}
	}
	s.revokers[target] = append(s.revokers[target], agent)
	return true
}

func (s *State) isRevoked(ev *protocol.Event) bool {
	if _, ok := s.withheld[ev.ID]; ok {
		return true
	}
	for _, a := range s.revokers[ev.ID] {
		if a == ev.AgentID {
			return true
		}
	}
	return false
}

// Revoked reports whether id is excluded from the views by its author's
// revocation, or withheld (SPEC §21.8).
func (s *State) Revoked(id string) bool {
	s.revMu.RLock()
	defer s.revMu.RUnlock()
	if _, ok := s.withheld[id]; ok {
		return true
	}
	_, ok := s.revoked[id]
	return ok
}

// markRevoked records id as revoked. Callers hold mu.
func (s *State) markRevoked(id string) {
	s.revMu.Lock()
	s.revoked[id] = struct{}{}
	s.revMu.Unlock()
}

// revokeTargets returns the distinct 64-hex e tags of a kind 9.
func revokeTargets(ev *protocol.Event) []string {
	var out []string
	for _, v := range ev.TagValues("e") {
		if !protocol.IsHex64(v) {
			continue
		}
		dup := false
		for _, o := range out {
			dup = dup || o == v
		}
		if !dup {
			out = append(out, v)
		}
	}
	return out
}

// addID adds the 32-byte id (hex) to sum as a little-endian 256-bit integer.
func addID(sum *[4]uint64, id string) {
	var b [32]byte
	hex.Decode(b[:], []byte(id))
	var carry uint64
	for i := range 4 {
		sum[i], carry = bits.Add64(sum[i], binary.LittleEndian.Uint64(b[8*i:]), carry)
	}
}
