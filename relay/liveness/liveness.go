// Package liveness folds kind 11 health beats (seed §5.5, decisions D11)
// into a rolling in-memory window and answers the liveness fields of
// GET /agents/{agent_id}/health and GET /agents.
//
// Beats are never stored: the relay verifies and rate-limits a kind 11
// event, hands it to Fold.Add with the time it received it, and drops it.
// Every figure is computed at query time from the retained beats and the
// query's now (D5). Unlike the other views, liveness is observational: it
// depends on when the relay heard each beat, not only on the set of events,
// and a restart empties it. LIVENESS.md states the fields and formulas.
package liveness

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
)

// Parameters of §5.5 and of the fold.
const (
	// BucketSeconds is the width of an uptime bucket (5 minutes); a beat
	// less than BucketSeconds old makes an agent healthy if it says ok.
	BucketSeconds = 300
	// Buckets24h and Buckets7d are the uptime denominators.
	Buckets24h = 24 * 3600 / BucketSeconds
	Buckets7d  = 7 * Buckets24h
	// StatusOK is the self-reported status a healthy agent's latest beat
	// carries.
	StatusOK = "ok"
	// DefaultWindow is how long beats are kept by default (§5.5: 7 days).
	DefaultWindow = 7 * 24 * time.Hour
	// DefaultMaxBeatsPerAgent bounds the beats kept per agent. Beyond
	// 2 × Buckets7d + 1 beats, 7 days of beats always include some that no
	// uptime figure needs (see compact), so the default never costs uptime.
	DefaultMaxBeatsPerAgent = 4096
	minMaxBeats             = 16
)

// Options tune a Fold.
type Options struct {
	// Window is how long a beat is kept after the latest receipt time seen
	// (default 7 days). uptime_7d_pct is exact only when Window ≥ 7 days.
	Window time.Duration
	// MaxBeatsPerAgent caps the beats kept per agent (default 4096, at
	// least 16). Past the cap, beats that change no uptime figure are
	// dropped, oldest first; only a cap below 2 × Window/300 + 1 can cost
	// the oldest beats themselves. See LIVENESS.md.
	MaxBeatsPerAgent int
}

// beat is one retained health beat (32 bytes).
type beat struct {
	at  int64   // min(receivedAt, created_at)
	id  uint64  // first 64 bits of the event id, for deduplication
	lat float64 // self-reported latency_ms; NaN when absent or invalid
	ok  bool    // self-reported status is "ok"
}

func (b *beat) before(c *beat) bool { return b.at < c.at || b.at == c.at && b.id < c.id }

// agent holds one agent's beats ordered by (at, id).
type agent struct{ beats []beat }

// Fold is the liveness window. It is safe for concurrent use: Add takes a
// write lock, queries a read lock.
type Fold struct {
	window  int64 // seconds
	slack   int64 // pruning hysteresis, window/16
	maxKeep int

	mu        sync.RWMutex
	agents    map[string]*agent
	high      int64 // latest receivedAt seen
	lastSweep int64
	beats     int
}

// New returns an empty Fold.
func New(opts Options) *Fold {
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.MaxBeatsPerAgent <= 0 {
		opts.MaxBeatsPerAgent = DefaultMaxBeatsPerAgent
	}
	window := max(int64(opts.Window/time.Second), 1)
	return &Fold{window: window, slack: max(window/16, 1), maxKeep: max(opts.MaxBeatsPerAgent, minMaxBeats),
		agents: make(map[string]*agent)}
}

// Add folds in a kind 11 beat the relay received at receivedAt (Unix
// seconds) and reports whether it was kept. It ignores other kinds, a beat
// whose id it already holds, and a beat already older than the window. It
// does not verify the signature (the relay has). Malformed content still
// counts as a beat, with no status (so not healthy) and no latency.
func (f *Fold) Add(ev *protocol.Event, receivedAt int64) bool {
	if ev.Kind != protocol.KindHealth {
		return false
	}
	b := parseBeat(ev, receivedAt)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.high = max(f.high, receivedAt)
	cutoff := f.high - f.window
	if b.at <= cutoff {
		return false
	}
	a := f.agents[ev.AgentID]
	if a == nil {
		a = &agent{}
		f.agents[strings.Clone(ev.AgentID)] = a
	}
	if !a.insert(b) {
		return false
	}
	f.beats++
	if a.beats[0].at <= cutoff-f.slack {
		f.beats -= a.prune(cutoff)
	}
	if len(a.beats) > f.maxKeep {
		f.beats -= a.compact(cutoff, f.maxKeep)
	}
	if f.high-f.lastSweep >= f.slack {
		f.sweep(cutoff)
	}
	return true
}

// parseBeat reads a beat. Its time is the earlier of the receipt time and
// created_at: the relay's clock keeps an agent from dating beats ahead, and
// created_at keeps a late or replayed beat from passing as a fresh one.
func parseBeat(ev *protocol.Event, receivedAt int64) beat {
	ok, lat := parseContent(ev.Content)
	return beat{at: min(receivedAt, ev.CreatedAt), id: idKey(ev.ID), lat: lat, ok: ok}
}

// parseContent reads the meta.health.v1 fields of a beat's content: ok is
// true when "status" is the string "ok"; lat is "latency_ms" when it is a
// finite number ≥ 0, NaN otherwise. Content that is not a JSON object
// yields (false, NaN).
func parseContent(content string) (ok bool, lat float64) {
	lat = math.NaN()
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(content), &obj) != nil {
		return false, lat
	}
	var status *string
	if raw, found := obj["status"]; found && json.Unmarshal(raw, &status) == nil && status != nil {
		ok = *status == StatusOK
	}
	var l *float64
	if raw, found := obj["latency_ms"]; found && json.Unmarshal(raw, &l) == nil && l != nil && *l >= 0 && !math.IsInf(*l, 0) {
		lat = *l
	}
	return ok, lat
}

// idKey returns the first 64 bits of a hex event id (a hash of any other
// string).
func idKey(id string) uint64 {
	if len(id) >= 16 {
		if v, err := strconv.ParseUint(id[:16], 16, 64); err == nil {
			return v
		}
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

// insert places b in order; it reports false when a beat with b's id is
// already held.
func (a *agent) insert(b beat) bool {
	for i := range a.beats {
		if a.beats[i].id == b.id {
			return false
		}
	}
	i := len(a.beats)
	for i > 0 && b.before(&a.beats[i-1]) { // beats mostly arrive in order
		i--
	}
	a.beats = append(a.beats, beat{})
	copy(a.beats[i+1:], a.beats[i:])
	a.beats[i] = b
	return true
}

// prune drops beats at or before cutoff and returns how many it dropped.
func (a *agent) prune(cutoff int64) int {
	k := 0
	for k < len(a.beats) && a.beats[k].at <= cutoff {
		k++
	}
	if k == 0 {
		return 0
	}
	n := copy(a.beats, a.beats[k:])
	a.beats = a.beats[:n]
	if cap(a.beats) > 2*n+minMaxBeats {
		a.beats = append(make([]beat, 0, n+n/4), a.beats...)
	}
	return k
}

// compact brings the agent back under limit and returns how many beats it
// dropped. It prunes beats at or before cutoff, then thins toward target
// (limit − limit/4, so that compaction is amortized): oldest first, it drops
// beats whose kept neighbours are less than BucketSeconds apart. Such a beat
// shares a bucket with one of them for every now, so no uptime figure,
// last_seen_at or is_healthy changes (the latest beat is always kept).
// Thinned beats hold at most 2 beats per 5 minutes, so a window of W
// seconds keeps at most 2W/300 + 1 after thinning (4033 for 7 days); only
// past that, when limit is smaller, does it drop the oldest beats.
func (a *agent) compact(cutoff int64, limit int) int {
	dropped := a.prune(cutoff)
	n := len(a.beats)
	if n <= limit {
		return dropped
	}
	excess := n - (limit - limit/4)
	out := a.beats[:1]
	for i := 1; i < n; i++ {
		if excess > 0 && i+1 < n && a.beats[i+1].at-out[len(out)-1].at < BucketSeconds {
			excess--
			continue
		}
		out = append(out, a.beats[i])
	}
	if len(out) > limit {
		out = out[:copy(out, out[len(out)-limit:])]
	}
	a.beats = out
	return dropped + n - len(out)
}

// sweep prunes every agent and forgets those left without beats.
func (f *Fold) sweep(cutoff int64) {
	for id, a := range f.agents {
		f.beats -= a.prune(cutoff)
		if len(a.beats) == 0 {
			delete(f.agents, id)
		}
	}
	f.lastSweep = f.high
}

// Stats returns the number of agents and beats held.
func (f *Fold) Stats() (agents, beats int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.agents), f.beats
}
