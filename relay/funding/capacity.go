package funding

import (
	"encoding/json"
	"sort"
)

// Report is an operator's latest capacity report (§13.7.2) and whether its
// shape is right.
type Report struct {
	Operator  string `json:"operator"`
	EventID   string `json:"event_id"`
	CreatedAt int64  `json:"created_at"`
	// Valid is true when the content has §13.7.2's shape; Problems says
	// what is wrong otherwise.
	Valid    bool     `json:"valid"`
	Problems []string `json:"problems"`
	// Content is the report as published (any JSON).
	Content json.RawMessage `json:"content"`
	// Reports counts the operator's held reports.
	Reports int `json:"reports"`
}

// Operators returns the agents that published a kind 10 relay announcement,
// sorted.
func (f *Fold) Operators() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]string, 0, len(f.operators))
	for a := range f.operators {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// Capacity returns the latest capacity report dated at or before until of
// every known relay operator that has one, sorted by operator.
func (f *Fold) Capacity(until int64) []Report {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := []Report{}
	for op := range f.operators {
		if r, n := f.latestReport(op, until); r != nil {
			out = append(out, reportOf(op, r, n))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Operator < out[j].Operator })
	return out
}

func (f *Fold) latestReport(op string, until int64) (*reportRec, int) {
	var best *reportRec
	n := 0
	for _, r := range f.reports[op] {
		if r.ev.CreatedAt > until {
			continue
		}
		n++
		if best == nil || later(r.ev, best.ev) {
			best = r
		}
	}
	return best, n
}

func reportOf(op string, r *reportRec, n int) Report {
	rep := Report{Operator: op, EventID: r.ev.ID, CreatedAt: r.ev.CreatedAt, Valid: r.report != nil,
		Problems: append([]string{}, r.problems...), Reports: n}
	if json.Valid([]byte(r.ev.Content)) {
		rep.Content = json.RawMessage(r.ev.Content)
	} else {
		rep.Content, _ = json.Marshal(r.ev.Content)
	}
	return rep
}
