package liveness

import (
	"math"
	"slices"
)

// Health is the body of GET /agents/{agent_id}/health (§5.5).
type Health struct {
	AgentID string `json:"agent_id"`
	// LastSeenAt is the time of the latest beat at or before now; nil when
	// the window holds none.
	LastSeenAt *int64 `json:"last_seen_at"`
	// IsHealthy: the latest beat is less than 5 minutes old and says
	// status "ok".
	IsHealthy bool `json:"is_healthy"`
	// Uptime24hPct and Uptime7dPct are 100 × (5-minute buckets with a
	// beat) / 288 or / 2016, rounded to 2 decimals.
	Uptime24hPct float64 `json:"uptime_24h_pct"`
	Uptime7dPct  float64 `json:"uptime_7d_pct"`
	// Beats24h counts the beats of the last 24 h.
	Beats24h int `json:"beats_24h"`
	// P50LatencyMs and P95LatencyMs are nearest-rank percentiles of the
	// latency_ms reported by the last 24 h's beats; nil when none did.
	P50LatencyMs *float64 `json:"p50_latency_ms"`
	P95LatencyMs *float64 `json:"p95_latency_ms"`
	// StatusNotes are the operator's notes when external probes disagree
	// with the agent's self-report. The fold never writes any (it is always
	// empty, never nil); the relay appends them.
	StatusNotes []string `json:"status_notes"`
}

// Summary is the liveness part of one GET /agents row (§5.5); the relay
// adds the profile name.
type Summary struct {
	AgentID      string  `json:"agent_id"`
	IsHealthy    bool    `json:"is_healthy"`
	Uptime24hPct float64 `json:"uptime_24h_pct"`
	LastSeenAt   *int64  `json:"last_seen_at"`
}

// Agent returns the health of agentID at now, counting only the beats in
// (now − Window, now]. ok is false when there are none; the Health is then
// the zero form (not healthy, uptimes 0, nulls, no notes).
func (f *Fold) Agent(agentID string, now int64) (h Health, ok bool) {
	h = Health{AgentID: agentID, StatusNotes: []string{}}
	f.mu.RLock()
	defer f.mu.RUnlock()
	beats := f.visible(agentID, now)
	if len(beats) == 0 {
		return h, false
	}
	h.LastSeenAt, h.IsHealthy = lastSeen(beats, now)
	n7, _ := countBuckets(beats, now, Buckets7d)
	n24, from := countBuckets(beats, now, Buckets24h)
	h.Uptime24hPct, h.Uptime7dPct = percent(n24, Buckets24h), percent(n7, Buckets7d)
	h.Beats24h = len(beats) - from
	var lats []float64
	for _, b := range beats[from:] {
		if !math.IsNaN(b.lat) {
			lats = append(lats, b.lat)
		}
	}
	h.P50LatencyMs, h.P95LatencyMs = percentile(lats, 50), percentile(lats, 95)
	return h, true
}

// Summary returns the GET /agents liveness fields of agentID at now, from
// the beats in (now − Window, now]; ok is false when there are none.
func (f *Fold) Summary(agentID string, now int64) (s Summary, ok bool) {
	s = Summary{AgentID: agentID}
	f.mu.RLock()
	defer f.mu.RUnlock()
	beats := f.visible(agentID, now)
	if len(beats) == 0 {
		return s, false
	}
	s.LastSeenAt, s.IsHealthy = lastSeen(beats, now)
	n24, _ := countBuckets(beats, now, Buckets24h)
	s.Uptime24hPct = percent(n24, Buckets24h)
	return s, true
}

// countBuckets returns the number of distinct buckets k = (now − at) / 300
// with k < limit among beats (all at or before now, in order), and the
// index of the first beat in one of those buckets.
func countBuckets(beats []beat, now int64, limit int64) (n, from int) {
	floor := now - limit*BucketSeconds // counted beats have at > floor
	edge := now + 1                    // the earliest at in the last bucket counted
	i := len(beats)
	for i > 0 && beats[i-1].at > floor {
		i--
		if at := beats[i].at; at < edge {
			k := (now - at) / BucketSeconds
			edge = now - k*BucketSeconds - (BucketSeconds - 1)
			n++
		}
	}
	return n, i
}

// visible returns the agent's beats in the window ending at now, (now −
// Window, now], as a shared slice (the caller holds the read lock). Pruning
// only drops beats at or before (latest receipt − Window), so for any now
// at or after the latest receipt the answer does not depend on when pruning
// ran.
func (f *Fold) visible(agentID string, now int64) []beat {
	a := f.agents[agentID]
	if a == nil {
		return nil
	}
	upTo := func(t int64) int {
		n, _ := slices.BinarySearchFunc(a.beats, t, func(b beat, t int64) int {
			if b.at <= t {
				return -1
			}
			return 1
		})
		return n
	}
	return a.beats[upTo(now-f.window):upTo(now)]
}

// lastSeen returns the time of the last beat and whether it makes the agent
// healthy: less than BucketSeconds before now, with status ok.
func lastSeen(beats []beat, now int64) (*int64, bool) {
	b := beats[len(beats)-1]
	at := b.at
	return &at, now-b.at < BucketSeconds && b.ok
}

// percent returns 100 × n / of, rounded to 2 decimals.
func percent(n, of int) float64 {
	return math.Round(float64(n)*100*100/float64(of)) / 100
}

// percentile returns the nearest-rank p-th percentile of xs (the value at
// rank ceil(p × len / 100) in ascending order), or nil when xs is empty. It
// sorts xs.
func percentile(xs []float64, p int) *float64 {
	if len(xs) == 0 {
		return nil
	}
	slices.Sort(xs)
	v := xs[(p*len(xs)+99)/100-1]
	return &v
}
