package trust

import "slices"

// sweep replays the flags of one event in (created_at, id) order. It keeps
// each flagger's current (latest so far) flag and the exact flag weight in
// millionths, so comparisons with the threshold never suffer rounding.
type sweep struct {
	flags   []flagRec
	author  int32
	w       *weigher
	cur     map[int32]int            // flagger → index of its current flag
	contrib map[int32]int64          // flagger → weight × sign
	listers map[int32]map[int32]bool // cosigner → flaggers whose current flag names it
	fw      int64                    // flag_weight in millionths
	appeals []Appeal
	lastApp int64 // created_at of the last counted appeal
	hasApp  bool
}

func newSweep(flags []flagRec, author int32, w *weigher) *sweep {
	return &sweep{flags: flags, author: author, w: w, cur: make(map[int32]int),
		contrib: make(map[int32]int64), listers: make(map[int32]map[int32]bool)}
}

func (s *sweep) isOverride(i int) bool { return s.flags[i].override && !s.flags[i].appeal }

// sign returns the sign of flagger x's current flag: 0 for an appeal, −(1 +
// counted cosigners) capped at −3 for an override by a top-5% flagger, +1
// otherwise (an override without the rank counts as a normal flag).
func (s *sweep) sign(x int32) int64 {
	f := &s.flags[s.cur[x]]
	switch {
	case f.appeal:
		return 0
	case f.override && s.w.canOverride(x):
		return -min(1+int64(len(s.cosigners(x))), MaxOverrideSign)
	default:
		return 1
	}
}

// cosigners returns the cosigners of x's current flag that count: those
// whose cosignature verifies, and those whose own current flag on the
// event is an override; never the event's author.
func (s *sweep) cosigners(x int32) []int32 {
	var out []int32
	f := &s.flags[s.cur[x]]
	for _, c := range f.cosigners {
		if c == s.author {
			continue
		}
		if j, ok := s.cur[c]; (ok && s.isOverride(j)) || slices.Contains(f.signed, c) {
			out = append(out, c)
		}
	}
	return out
}

func (s *sweep) recompute(x int32) {
	c := s.w.weight(x) * s.sign(x)
	s.fw += c - s.contrib[x]
	s.contrib[x] = c
}

// apply folds flag i in.
func (s *sweep) apply(i int) {
	f := &s.flags[i]
	x := f.flagger
	if x == s.author {
		s.appeal(f)
		return
	}
	wasOverride := false
	if old, had := s.cur[x]; had {
		wasOverride = s.isOverride(old)
		for _, c := range s.flags[old].cosigners {
			delete(s.listers[c], x)
		}
	}
	s.cur[x] = i
	for _, c := range f.cosigners {
		if s.listers[c] == nil {
			s.listers[c] = make(map[int32]bool)
		}
		s.listers[c][x] = true
	}
	s.recompute(x)
	if wasOverride != s.isOverride(i) {
		for y := range s.listers[x] { // integer sums: iteration order is irrelevant
			s.recompute(y)
		}
	}
}

// appeal records a flag by the event's author: it never weighs (sign 0) and
// is counted only 24 h or more after the previous counted appeal.
func (s *sweep) appeal(f *flagRec) {
	counted := !s.hasApp || f.createdAt-s.lastApp >= AppealCooldown
	if counted {
		s.lastApp, s.hasApp = f.createdAt, true
	}
	s.appeals = append(s.appeals, Appeal{EventID: f.id, Category: f.category, Reason: f.reason,
		CreatedAt: f.createdAt, Counted: counted})
}

// run replays every flag and records the visibility history up to at.
// Desired state after the flags of second t: hidden iff flag_weight ≥
// threshold. Visibility starts visible and takes the desired state at the
// earliest instant it differs from it and at least Debounce seconds have
// passed since the previous transition (none are needed before the first).
func (s *sweep) run(at, threshold int64, em *EventModeration) {
	vis, last, moved := Visible, int64(0), false
	desired := func() string {
		if s.fw >= threshold {
			return Hidden
		}
		return Visible
	}
	move := func(t int64) {
		vis, last, moved = desired(), t, true
		em.History = append(em.History, Transition{At: t, Visibility: vis, FlagWeight: fromMicros(s.fw)})
	}
	for i := 0; i < len(s.flags); {
		t := s.flags[i].createdAt
		if moved && desired() != vis && last+Debounce < t {
			move(last + Debounce) // a change held back by the debounce falls due
		}
		for ; i < len(s.flags) && s.flags[i].createdAt == t; i++ {
			s.apply(i)
		}
		if desired() != vis && (!moved || t >= last+Debounce) {
			move(t)
		}
	}
	if moved && desired() != vis {
		if last+Debounce <= at {
			move(last + Debounce)
		} else {
			em.Pending = &PendingChange{Visibility: desired(), At: last + Debounce}
		}
	}
	em.Visibility, em.FlagWeight = vis, fromMicros(s.fw)
	if len(em.History) > 0 { // the first transition is always to hidden
		em.FirstHiddenAt = em.History[0].At
	}
	if vis == Hidden {
		em.HiddenSince = last
	}
}

// report fills the flags, flag count and appeals of em from the final state.
func (s *sweep) report(em *EventModeration) {
	em.Flags = make([]FlagView, 0, len(s.cur))
	for i := range s.flags {
		x := s.flags[i].flagger
		if j, ok := s.cur[x]; !ok || j != i {
			continue
		}
		f := &s.flags[i]
		sign := s.sign(x)
		if sign > 0 {
			em.FlagCount++
		}
		v := FlagView{EventID: f.id, Flagger: s.w.names[x], Category: f.category, Reason: f.reason,
			CreatedAt: f.createdAt, Override: f.override, Appeal: f.appeal, Sign: float64(sign),
			Weight: fromMicros(s.w.weight(x)), Cosigners: []string{}}
		if sign < 0 {
			for _, c := range s.cosigners(x) {
				v.Cosigners = append(v.Cosigners, s.w.names[c])
			}
		}
		em.Flags = append(em.Flags, v)
	}
	em.Appeals = s.appeals
	if em.Appeals == nil {
		em.Appeals = []Appeal{}
	}
	if em.History == nil {
		em.History = []Transition{}
	}
}
