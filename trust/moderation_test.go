package trust

import (
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
)

// Agents in these tests: 10 authors the post; 1–6 are untrusted flaggers
// (weight_mod 1); 40 is the only ranked agent (three voters, 50–52, give it
// weighted score 1, so rank 1 of 1: top 5%, weight_mod 2); 41–43 are
// unranked. The votes on 40 are dated after every evaluation time, so their
// age is 0 and weight_mod(40) is exactly 2.
const (
	author    = 10
	overrider = 40
)

func trustedSetup(v views) {
	v.add(established(50, 51, 52)...)
	for _, voter := range []int{50, 51, 52} {
		v.add(vote(voter, t0+30*86400, 1, "", overrider))
	}
}

func TestHideAtThreshold(t *testing.T) {
	v := newViews()
	p := post(author, t0, "hello")
	v.add(p)
	v.add(flag(1, t0+100, "spam", p), flag(2, t0+200, "disinfo", p))
	s := v.m.Compute(t0 + 600)
	if em := s.Event(p.ID); em.Visibility != Visible || em.FlagWeight != 2 || em.FlagCount != 2 || em.HideThreshold != 3 || len(em.History) != 0 {
		t.Fatalf("two flags: %+v", em)
	}
	v.add(flag(3, t0+300, "spam", p))
	s = v.m.Compute(t0 + 600)
	em := s.Event(p.ID)
	want := []Transition{{At: t0 + 300, Visibility: Hidden, FlagWeight: 3}}
	if em.Visibility != Hidden || !reflect.DeepEqual(em.History, want) || em.FirstHiddenAt != t0+300 || em.HiddenSince != t0+300 {
		t.Fatalf("three flags: %+v", em)
	}
	if !s.Hidden(p.ID) || s.Hidden(fakeID("x", 1)) {
		t.Fatal("Hidden disagrees with Event")
	}
	if hb := s.HiddenBy(agent(author)); len(hb) != 1 || hb[0].EventID != p.ID || hb[0].FlagCount != 3 || hb[0].FirstHiddenAt != t0+300 {
		t.Fatalf("author notices: %+v", hb)
	}
	if !s.FlaggedBy(p.ID, agent(2)) || s.FlaggedBy(p.ID, agent(4)) {
		t.Fatal("FlaggedBy")
	}
	// Evaluated before the third flag, the event was still visible.
	if v.m.Compute(t0 + 240).Hidden(p.ID) {
		t.Fatal("hidden before the third flag")
	}
	// A second flag by the same flagger replaces its first.
	v.add(flag(3, t0+400, "other", p))
	if em := v.m.Compute(t0 + 600).Event(p.ID); em.FlagWeight != 3 || len(em.Flags) != 3 {
		t.Fatalf("re-flag counted twice: %+v", em)
	}
}

func TestOverrideDebounce(t *testing.T) {
	v := newViews()
	trustedSetup(v)
	p := post(author, t0, "satire")
	v.add(p, flag(1, t0+100, "spam", p), flag(2, t0+200, "spam", p), flag(3, t0+300, "spam", p))
	v.add(flag(overrider, t0+900, "override", p))

	// fw = 3 − 2 = 1: the override wants it visible, the debounce holds it
	// hidden until an hour after it was hidden.
	em := v.m.Compute(t0 + 1800).Event(p.ID)
	if em.Visibility != Hidden || em.FlagWeight != 1 || em.Pending == nil || *em.Pending != (PendingChange{Visible, t0 + 3900}) {
		t.Fatalf("before the debounce: %+v", em)
	}
	em = v.m.Compute(t0 + 3900).Event(p.ID)
	want := []Transition{{t0 + 300, Hidden, 3}, {t0 + 3900, Visible, 1}}
	if em.Visibility != Visible || !reflect.DeepEqual(em.History, want) || em.Pending != nil || em.HiddenSince != 0 || em.FirstHiddenAt != t0+300 {
		t.Fatalf("after the debounce: %+v", em)
	}
	for _, f := range em.Flags {
		if f.Flagger == agent(overrider) && (f.Sign != -1 || f.Weight != 2 || !f.Override) {
			t.Fatalf("override flag view: %+v", f)
		}
	}

	// The overrider turns its flag into spam (latest wins): fw = 3 + 2 = 5.
	// Hiding again waits for an hour after the previous transition; flag 4
	// arrives after that and the history records the deferred change first.
	v.add(flag(overrider, t0+4000, "spam", p), flag(4, t0+8000, "spam", p))
	em = v.m.Compute(t0 + 9000).Event(p.ID)
	want = append(want, Transition{t0 + 7500, Hidden, 5})
	if !reflect.DeepEqual(em.History, want) || em.FlagWeight != 6 || em.HiddenSince != t0+7500 || em.FirstHiddenAt != t0+300 || em.FlagCount != 5 {
		t.Fatalf("re-hide: %+v", em)
	}
	// Evaluated between 4000 and 7500 the re-hide is pending.
	if em = v.m.Compute(t0 + 5400).Event(p.ID); em.Visibility != Visible || em.Pending == nil || em.Pending.At != t0+7500 {
		t.Fatalf("pending re-hide: %+v", em)
	}
}

func TestDesiredStateMustHoldWhenDebounceEnds(t *testing.T) {
	v := newViews()
	trustedSetup(v)
	p := post(author, t0, "x")
	v.add(p, flag(1, t0+60, "spam", p), flag(2, t0+60, "spam", p), flag(3, t0+60, "spam", p))
	// Hidden at 60. The override at 600 wants visible; the overrider takes it
	// back at 1200, before the debounce ends at 3660: no transition.
	v.add(flag(overrider, t0+600, "override", p), flag(overrider, t0+1200, "spam", p))
	em := v.m.Compute(t0 + 7200).Event(p.ID)
	if len(em.History) != 1 || em.Visibility != Hidden || em.Pending != nil || em.FlagWeight != 5 {
		t.Fatalf("%+v", em)
	}
}

func TestOverrideNeedsTopFivePercent(t *testing.T) {
	v := newViews()
	trustedSetup(v)
	p := post(author, t0, "x")
	v.add(p, flag(1, t0+60, "spam", p), flag(2, t0+60, "spam", p))
	// 41 is unranked: its override counts as a normal flag (+1), hiding the post.
	v.add(flag(41, t0+120, "other", p, []string{"override", "true"}))
	em := v.m.Compute(t0 + 600).Event(p.ID)
	if em.Visibility != Hidden || em.FlagWeight != 3 {
		t.Fatalf("%+v", em)
	}
	for _, f := range em.Flags {
		if f.Flagger == agent(41) && (f.Sign != 1 || !f.Override) {
			t.Fatalf("unranked override: %+v", f)
		}
	}
}

func TestCosignedOverride(t *testing.T) {
	v := newViews()
	trustedSetup(v)
	p := post(author, t0, "x")
	v.add(p)
	for f := 1; f <= 6; f++ {
		v.add(flag(f, t0+60, "spam", p))
	}
	// 41 cosigns with its own override (an unranked override: +1); 42 is
	// named but has not flagged, so it does not count: sign −2, weight 2.
	v.add(flag(41, t0+120, "override", p))
	v.add(flag(overrider, t0+180, "override", p, cosign(41, 42, 43)...))
	em := v.m.Compute(t0 + 600).Event(p.ID)
	if em.FlagWeight != 6+1-4 {
		t.Fatalf("one cosigner: %+v", em)
	}
	// 42 and 43 override too: 1 + 3 cosigners is clamped to −3.
	v.add(flag(42, t0+240, "override", p), flag(43, t0+240, "override", p))
	em = v.m.Compute(t0 + 600).Event(p.ID)
	if em.FlagWeight != 6+3-6 {
		t.Fatalf("clamped: %+v", em)
	}
	for _, f := range em.Flags {
		if f.Flagger == agent(overrider) && (f.Sign != -3 || len(f.Cosigners) != 3) {
			t.Fatalf("override view: %+v", f)
		}
	}
	// 41 turns its flag into spam: it no longer cosigns; the override drops
	// to 1 + 2 = −3 still, so take 42 back as well: −2.
	v.add(flag(41, t0+300, "spam", p), flag(42, t0+300, "spam", p))
	em = v.m.Compute(t0 + 600).Event(p.ID)
	if em.FlagWeight != 6+3-4 {
		t.Fatalf("withdrawn cosigners: %+v", em)
	}
	// A tag naming the overrider itself or the author never counts.
	q := post(author, t0, "y")
	v.add(q, flag(author, t0+60, "override", q))
	v.add(flag(overrider, t0+120, "override", q, cosign(overrider, author)...))
	if em = v.m.Compute(t0 + 600).Event(q.ID); em.FlagWeight != -2 {
		t.Fatalf("self and author cosign: %+v", em)
	}
}

func TestAppeals(t *testing.T) {
	v := newViews()
	p := post(author, t0, "x")
	v.add(p, flag(1, t0+60, "spam", p), flag(2, t0+60, "spam", p))
	day := int64(86400)
	v.add(flag(author, t0+100, "spam", p)) // the author's own flag is an appeal
	v.add(flag(author, t0+100+3600, "appeal", p, []string{"appeal", "true"}))
	v.add(flag(author, t0+100+day, "appeal", p))
	v.add(flag(author, t0+100+2*day-1, "appeal", p))
	v.add(flag(3, t0+200, "other", p, []string{"appeal", "true"})) // not the author: sign 0
	em := v.m.Compute(t0 + 3*day).Event(p.ID)
	if em.Visibility != Visible || em.FlagWeight != 2 || em.FlagCount != 2 || len(em.Flags) != 3 {
		t.Fatalf("%+v", em)
	}
	var counted []bool
	for _, a := range em.Appeals {
		counted = append(counted, a.Counted)
	}
	if !reflect.DeepEqual(counted, []bool{true, false, true, false}) {
		t.Fatalf("appeal cooldown: %v", counted)
	}
	// Revoking the first appeal makes the one an hour later the counted one,
	// and the cooldown now runs from there.
	v.remove(flag(author, t0+100, "spam", p))
	em = v.m.Compute(t0 + 3*day).Event(p.ID)
	counted = counted[:0]
	for _, a := range em.Appeals {
		counted = append(counted, a.Counted)
	}
	if !reflect.DeepEqual(counted, []bool{true, false, true}) {
		t.Fatalf("after revoking an appeal: %v", counted)
	}
}

func TestTargetArrivesAfterItsFlags(t *testing.T) {
	p := post(author, t0, "x")
	flags := []*protocol.Event{flag(1, t0+60, "spam", p), flag(2, t0+60, "spam", p), flag(author, t0+60, "spam", p)}
	v := newViews()
	v.add(flags...)
	// The author is unknown: its flag counts as anyone's.
	if em := v.m.Compute(t0 + 600).Event(p.ID); em.Author != "" || em.Visibility != Hidden {
		t.Fatalf("before the target: %+v", em)
	}
	v.add(p)
	late := v.m.Compute(t0 + 600)
	if em := late.Event(p.ID); em.Author != agent(author) || em.Visibility != Visible || len(em.History) != 0 || len(em.Appeals) != 1 {
		t.Fatalf("after the target: %+v", em)
	}
	w := newViews()
	w.add(p)
	w.add(flags...)
	if w.m.Digest(t0+600) != late.Digest() {
		t.Fatal("digest depends on whether the target came first")
	}
}

func TestThresholdFollowsActiveAgents(t *testing.T) {
	v := newViews()
	p := post(author, t0, "x")
	v.add(p)
	// 3995 agents active in the window, 500 only before it, 300 only after now.
	for i := 0; i < 4795; i++ {
		at := t0 - int64(i%29)*86400
		switch {
		case i >= 4495:
			at = t0 + 7200
		case i >= 3995:
			at = t0 - 30*86400 // exactly 30 days before: outside (now − 30 d, now]
		}
		v.add(&protocol.Event{ID: fakeID("ev", i), AgentID: fakeID("ag", i), CreatedAt: at, Kind: protocol.KindPost})
	}
	for f := 1; f <= 4; f++ {
		v.add(flag(f, t0+int64(f)*10, "spam", p))
	}
	// Active: 3995 + the author + 4 flaggers = 4000, so hide_threshold = 4.
	s := v.m.Compute(t0 + 60)
	if s.ActiveAgents != 4000 || s.HideThreshold != 4 {
		t.Fatalf("active %d threshold %v", s.ActiveAgents, s.HideThreshold)
	}
	em := s.Event(p.ID)
	if em.Visibility != Hidden || em.History[0].At != t0+40 || em.HideThreshold != 4 {
		t.Fatalf("%+v", em)
	}
	// One more active agent lifts the threshold to 4.001: four flags no longer hide.
	v.add(&protocol.Event{ID: fakeID("ev", -1), AgentID: fakeID("ag", -1), CreatedAt: t0, Kind: protocol.KindPost})
	if s = v.m.Compute(t0 + 60); s.HideThreshold != 4.001 || s.Hidden(p.ID) {
		t.Fatalf("threshold %v hidden %v", s.HideThreshold, s.Hidden(p.ID))
	}
}

func TestPublishedChanges(t *testing.T) {
	var mu sync.Mutex
	var published []*ModSnapshot
	g := NewGraph(Options{})
	m := NewModeration(g, ModerationOptions{OnPublish: func(s *ModSnapshot) {
		mu.Lock()
		published = append(published, s)
		mu.Unlock()
	}})
	v := views{g, m}
	p := post(author, t0, "x")
	v.add(p)
	if s := m.Refresh(t0 + 600); s.Seq != 1 || len(s.Changed) != 0 || m.Hidden(p.ID) {
		t.Fatalf("first: %+v", s)
	}
	if s := m.Refresh(t0 + 600); s.Seq != 1 || m.due(s, t0+630) || !m.due(s, t0+660) {
		t.Fatal("refreshed without a change, or due without a change in the same minute, or not due in the next")
	}
	f3 := flag(3, t0+300, "spam", p)
	v.add(flag(1, t0+100, "spam", p), flag(2, t0+200, "spam", p), f3)
	s := m.Refresh(t0 + 600)
	want := []VisibilityChange{{EventID: p.ID, Author: agent(author), Visibility: Hidden, At: t0 + 300}}
	if s.Seq != 2 || !reflect.DeepEqual(s.Changed, want) || !m.Hidden(p.ID) || s.Version != m.Version() {
		t.Fatalf("hidden: %+v", s)
	}
	v.remove(f3)
	s = m.Refresh(t0 + 600)
	want = []VisibilityChange{{EventID: p.ID, Author: agent(author), Visibility: Visible}}
	if s.Seq != 3 || !reflect.DeepEqual(s.Changed, want) || m.Hidden(p.ID) {
		t.Fatalf("revoked: %+v", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(published) != 3 || published[2] != s {
		t.Fatalf("OnPublish saw %d snapshots", len(published))
	}
}

func TestCurrentRefreshesInBackground(t *testing.T) {
	g := NewGraph(Options{MinInterval: time.Nanosecond})
	m := NewModeration(g, ModerationOptions{Options: Options{MinInterval: time.Nanosecond}})
	v := views{g, m}
	p := post(author, t0, "x")
	v.add(p)
	first := m.Current(t0 + 600) // nothing published: computed synchronously
	if first == nil || first.Seq != 1 || g.Latest() == nil || g.Latest().Now != t0+600 {
		t.Fatalf("first Current: %+v", first)
	}
	v.add(flag(1, t0+100, "spam", p), flag(2, t0+200, "spam", p), flag(3, t0+300, "spam", p))
	v.add(vote(1, t0, 1, "", 2))
	if s := m.Current(t0 + 600); s != first {
		t.Fatal("Current computed on the request path")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !m.Hidden(p.ID) || g.Latest().Version != g.Version() {
		if time.Now().After(deadline) {
			t.Fatal("background refresh never published")
		}
		time.Sleep(time.Millisecond)
		m.Current(t0 + 600)
		g.Current(t0 + 600)
	}
	// Far behind (more than MaxLag): computed synchronously.
	if s := g.Current(t0 + 86400); s.Now != t0+86400 {
		t.Fatalf("lagging snapshot served: %d", s.Now)
	}
}

// TestDueWithoutReaders: a published snapshot falls due when a flag dated
// after it starts to count and when a debounced transition goes through,
// not only at the next minute; and when new flags arrive once MinInterval
// has passed.
func TestDueWithoutReaders(t *testing.T) {
	g := NewGraph(Options{MinInterval: time.Nanosecond})
	m := NewModeration(g, ModerationOptions{Options: Options{MinInterval: time.Nanosecond}})
	v := views{g, m}
	p := post(author, t0, "x")
	v.add(p)
	s := m.Refresh(t0 + 10)
	if m.due(s, t0+20) {
		t.Fatal("due without any change")
	}
	f3 := flag(3, t0+30, "spam", p)
	v.add(flag(1, t0+10, "spam", p), flag(2, t0+10, "spam", p), f3)
	if !m.due(s, t0+11) {
		t.Fatal("not due after new flags")
	}
	if s = m.Refresh(t0 + 11); s.Hidden(p.ID) || s.wake != t0+30 || m.due(s, t0+29) || !m.due(s, t0+30) {
		t.Fatalf("flag dated ahead: hidden %v wake %d", s.Hidden(p.ID), s.wake-t0)
	}
	if s = m.Refresh(t0 + 30); !s.Hidden(p.ID) || s.wake != 0 {
		t.Fatalf("at the third flag: hidden %v wake %d", s.Hidden(p.ID), s.wake-t0)
	}
}

// TestDueAtDebouncedTransition: a published snapshot holding a debounced
// change falls due the second the debounce lets it through.
func TestDueAtDebouncedTransition(t *testing.T) {
	v := newViews()
	trustedSetup(v)
	p := post(author, t0, "satire")
	v.add(p, flag(1, t0+100, "spam", p), flag(2, t0+200, "spam", p), flag(3, t0+300, "spam", p))
	v.add(flag(overrider, t0+900, "override", p))
	s := v.m.Refresh(t0 + 1800)
	if !s.Hidden(p.ID) || s.wake != t0+3900 || v.m.due(s, t0+1801) || !v.m.due(s, t0+3900) {
		t.Fatalf("hidden %v wake %d", s.Hidden(p.ID), s.wake-t0)
	}
	if s = v.m.Refresh(t0 + 3900); s.Hidden(p.ID) || s.wake != 0 {
		t.Fatalf("after the debounce: hidden %v wake %d", s.Hidden(p.ID), s.wake-t0)
	}
}
