package trust

import (
	"cmp"
	"slices"
)

// OpenAppeal is an appeal awaiting review (seed §7.3, "queued for
// high-trust readers"): a hidden event whose author has appealed. Appeal*
// describe the author's latest counted appeal; the rest is the event's
// moderation state, with the weights of the flags that hide it.
type OpenAppeal struct {
	AppealID        string     `json:"appeal_id"`
	AppealCategory  string     `json:"appeal_category"`
	AppealReason    string     `json:"appeal_reason"`
	AppealCreatedAt int64      `json:"appeal_created_at"`
	Appeals         int        `json:"appeals"`
	EventID         string     `json:"event_id"`
	Author          string     `json:"author"`
	FlagWeight      float64    `json:"flag_weight"`
	HideThreshold   float64    `json:"hide_threshold"`
	FlagCount       int        `json:"flag_count"`
	FirstHiddenAt   int64      `json:"first_hidden_at"`
	HiddenSince     int64      `json:"hidden_since"`
	Flags           []FlagView `json:"flags"`
}

// OpenAppeals returns every open appeal: one per hidden event with at
// least one counted appeal, newest appeal first (ties by appeal id, then
// event id, descending). An appeal closes when its event is visible again.
func (s *ModSnapshot) OpenAppeals() []OpenAppeal {
	var out []OpenAppeal
	for _, h := range s.hidden {
		em, ok := s.events[h.EventID]
		if !ok {
			continue
		}
		var last *Appeal
		n := 0
		for i := range em.Appeals {
			if a := &em.Appeals[i]; a.Counted {
				n++
				if last == nil || a.CreatedAt > last.CreatedAt || a.CreatedAt == last.CreatedAt && a.EventID > last.EventID {
					last = a
				}
			}
		}
		if last == nil {
			continue
		}
		out = append(out, OpenAppeal{AppealID: last.EventID, AppealCategory: last.Category, AppealReason: last.Reason,
			AppealCreatedAt: last.CreatedAt, Appeals: n, EventID: em.EventID, Author: em.Author, FlagWeight: em.FlagWeight,
			HideThreshold: em.HideThreshold, FlagCount: em.FlagCount, FirstHiddenAt: em.FirstHiddenAt,
			HiddenSince: em.HiddenSince, Flags: em.Flags})
	}
	slices.SortFunc(out, func(a, b OpenAppeal) int {
		return cmp.Or(cmp.Compare(b.AppealCreatedAt, a.AppealCreatedAt), cmp.Compare(b.AppealID, a.AppealID), cmp.Compare(b.EventID, a.EventID))
	})
	return out
}
