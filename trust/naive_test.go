package trust

import (
	"reflect"
	"slices"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// TestModerationMatchesNaive compares the incremental sweep with a plain
// transcription of the moderation rules: flag_weight recomputed from
// scratch at every candidate instant, instants stepped through in time.
func TestModerationMatchesNaive(t *testing.T) {
	checked := 0
	for seed := uint64(1); seed <= 8; seed++ {
		s := randomStream(seed)
		v := newViews()
		var kept []*protocol.Event
		for _, e := range s.events {
			if !s.revoked[e.ID] {
				v.add(e)
				kept = append(kept, e)
			}
		}
		nows := []int64{t0 + 3600}
		for _, p := range s.posts[:6] {
			nows = append(nows, p.CreatedAt+1800, p.CreatedAt+5400)
		}
		for _, now := range nows {
			now = EvalTime(now)
			ts, ms := v.g.Compute(now), v.m.Compute(now)
			threshold := naiveThreshold(kept, now)
			if ms.HideThreshold != fromMicros(threshold) {
				t.Fatalf("seed %d: threshold %v, naive %v", seed, ms.HideThreshold, fromMicros(threshold))
			}
			for _, p := range s.posts {
				author := ""
				if !s.revoked[p.ID] {
					author = p.AgentID
				}
				vis, fw, hist := naiveVisibility(kept, p.ID, author, ts, threshold, now)
				em := ms.Event(p.ID)
				if em.Visibility != vis || em.FlagWeight != fromMicros(fw) || !reflect.DeepEqual(em.History, hist) {
					t.Fatalf("seed %d post %s at %d:\n got %s %v %+v\nwant %s %v %+v", seed, p.ID[:8], now,
						em.Visibility, em.FlagWeight, em.History, vis, fromMicros(fw), hist)
				}
				checked += len(hist)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no transitions compared")
	}
}

func naiveThreshold(events []*protocol.Event, now int64) int64 {
	active := map[string]bool{}
	for _, e := range events {
		if e.CreatedAt > now-30*86400 && e.CreatedAt <= now {
			active[e.AgentID] = true
		}
	}
	return max(3_000_000, int64(len(active))*1000)
}

// naiveFlag is what the rules read from one flag event.
type naiveFlag struct {
	ev               *protocol.Event
	appeal, override bool
}

func readFlag(e *protocol.Event) naiveFlag {
	cat, _, _ := protocol.ParseFlag(e.Content)
	return naiveFlag{ev: e,
		appeal:   cat == "appeal" || slices.Contains(e.TagValues("appeal"), "true"),
		override: cat == "override" || slices.Contains(e.TagValues("override"), "true")}
}

// naiveWeight is flag_weight (millionths) from the flags created at or
// before t.
func naiveWeight(flags []*protocol.Event, author string, ts *Snapshot, t int64) int64 {
	cur := map[string]naiveFlag{}
	for _, e := range flags { // sorted by (created_at, id)
		if e.CreatedAt <= t && e.AgentID != author {
			cur[e.AgentID] = readFlag(e)
		}
	}
	total := int64(0)
	for x, f := range cur {
		sign := int64(1)
		switch {
		case f.appeal:
			sign = 0
		case f.override && ts.InTopPercent(x, 5):
			seen := map[string]bool{}
			for _, c := range f.ev.TagValues("cosign") {
				if cf, ok := cur[c]; ok && c != x && !seen[c] && cf.override && !cf.appeal {
					seen[c] = true
				}
			}
			for _, c := range protocol.Cosignatures(f.ev) {
				if c.Valid && c.AgentID != x && c.AgentID != author {
					seen[c.AgentID] = true
				}
			}
			sign = -min(3, 1+int64(len(seen)))
		}
		total += micros(ts.WeightMod(x)) * sign
	}
	return total
}

func naiveVisibility(events []*protocol.Event, id, author string, ts *Snapshot, threshold, now int64) (string, int64, []Transition) {
	var flags []*protocol.Event
	for _, e := range events {
		if e.Kind == protocol.KindFlag && e.CreatedAt <= now && slices.Contains(e.TagValues("e"), id) {
			flags = append(flags, e)
		}
	}
	slices.SortFunc(flags, func(a, b *protocol.Event) int {
		if protocol.Less(a, b) {
			return -1
		}
		return 1
	})
	desired := func(t int64) string {
		if naiveWeight(flags, author, ts, t) >= threshold {
			return Hidden
		}
		return Visible
	}
	vis, last, hist := Visible, int64(-1), []Transition{}
	// Candidate instants: every flag time, and an hour after each transition.
	for t := int64(-1); ; {
		next := int64(1) << 62
		for _, f := range flags {
			if f.CreatedAt > t {
				next = min(next, f.CreatedAt)
				break
			}
		}
		if last >= 0 && last+3600 > t {
			next = min(next, last+3600)
		}
		if next > now {
			break
		}
		t = next
		if d := desired(t); d != vis && (last < 0 || t >= last+3600) {
			vis, last = d, t
			hist = append(hist, Transition{At: t, Visibility: d, FlagWeight: fromMicros(naiveWeight(flags, author, ts, t))})
		}
	}
	return vis, naiveWeight(flags, author, ts, now), hist
}
