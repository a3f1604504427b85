package branches

import (
	"context"
	"net/http"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

// BranchRow is one row of GET /branches (seed §11.3.4).
type BranchRow struct {
	Branch
	HeadEventID    string  `json:"head_event_id"`
	EventCount     int64   `json:"event_count"`
	TrustWeightPct float64 `json:"trust_weight_pct"`
}

// Counts returns, for each branch of v, its event count and head (the
// latest member by (created_at, id)), scanning the log once.
func Counts(ctx context.Context, v View, each func(func(*protocol.Event) error) error) (map[string]*BranchRow, error) {
	rows := map[string]*BranchRow{}
	for _, b := range v.Branches {
		rows[b.ID] = &BranchRow{Branch: b}
	}
	var heads = map[string]*protocol.Event{}
	err := each(func(e *protocol.Event) error {
		for _, id := range v.Members(e) {
			rows[id].EventCount++
			if h := heads[id]; h == nil || e.CreatedAt > h.CreatedAt || (e.CreatedAt == h.CreatedAt && e.ID > h.ID) {
				heads[id] = e
			}
		}
		return nil
	})
	for id, h := range heads {
		rows[id].HeadEventID = h.ID
	}
	return rows, err
}

// getBranches is GET /branches.
func (m *Module) getBranches(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	now := m.core.Now()
	vp := m.fold.Current(now)
	v := *vp
	r, err := m.scanned(vp, "counts", func() (any, error) {
		return Counts(c.Request().Context(), v, LogEvents(c.Request().Context(), m.core.Log()))
	})
	if err != nil {
		return err
	}
	rows := r.(map[string]*BranchRow)
	snap := m.core.State().Trust.Current(now)
	var total float64
	by := map[string]float64{}
	for agent, pref := range m.fold.Preferences(now) {
		w := snap.Weight(agent)
		total += w
		by[pref] += w
	}
	out := make([]BranchRow, 0, len(v.Branches))
	for _, b := range v.Branches {
		row := *rows[b.ID] // the cached rows are shared: copy
		if total > 0 {
			row.TrustWeightPct = round6(100 * by[b.ID] / total)
		}
		out = append(out, row)
	}
	return c.JSON(http.StatusOK, out)
}
