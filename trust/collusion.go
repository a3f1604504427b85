package trust

// CategoryCollusion is the kind 7 category that challenges a verifier
// (seed §18.6.1: "Verifiers can be challenged via kind 7 moderation_flag
// with category=collusion (same machinery as §7.4 override)").
const CategoryCollusion = "collusion"

// Challenged reports whether agent is a verifier whose collusion challenge
// holds: one of its events (a kind 53 verdict, for which the category is
// meant) is hidden, by the §7 machinery (flag weights, threshold,
// overrides and cosigners, appeals, debounce), while at least one of the
// flags counted against it (sign > 0) is a collusion flag.
func (s *ModSnapshot) Challenged(agent string) bool {
	for _, h := range s.HiddenBy(agent) {
		em := s.events[h.EventID]
		if em == nil {
			continue
		}
		for _, f := range em.Flags {
			if f.Category == CategoryCollusion && f.Sign > 0 {
				return true
			}
		}
	}
	return false
}

// VerifierWeight is the verifier weight of the high-stakes consensus and
// the credit that follows it (§18.6.1): ts.Weight, and 0 for an agent ms
// says is Challenged. ts and ms should be of the same evaluation time.
func VerifierWeight(ts *Snapshot, ms *ModSnapshot) func(agent string) float64 {
	return func(agent string) float64 {
		if ms.Challenged(agent) {
			return 0
		}
		return ts.Weight(agent)
	}
}
