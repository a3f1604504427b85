// Package views serves the built-in derived views over HTTP: trust
// (/trust, /trust_graph, /agents/{id}/trust_received), moderation
// (/events/{id}/flags), tasks (/task/{id}, /tasks), credit
// (/agents/{id}/credit) and the state digest (/state). The views
// themselves are folds in package state; this module only answers from
// them, through the core's exported API.
package views

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/trust"
	"github.com/labstack/echo/v4"
)

// Module serves the built-in views' routes (trust, moderation,
// tasks, credit) and GET /state, through the core's exported API only.
type Module struct{ core *relay.Server }

// NewModule returns the views module; cmd/anp2 lists it first.
func NewModule() *Module { return &Module{} }

// Name is the module's name in logs (it has no fold of its own).
func (*Module) Name() string { return "views" }

// Mount registers the view routes.
func (m *Module) Mount(core *relay.Server) error {
	m.core = core
	core.Route(http.MethodGet, "/trust/:agent_id", m.getTrust)
	core.Route(http.MethodGet, "/trust_graph", m.getTrustGraph)
	core.Route(http.MethodGet, "/agents/:agent_id/trust_received", m.getTrustReceived)
	core.Route(http.MethodGet, "/events/:id/flags", m.getFlags)
	core.Route(http.MethodGet, "/task/:task_id", m.getTask)
	core.Route(http.MethodGet, "/tasks", m.getTasks)
	core.Route(http.MethodGet, "/agents/:agent_id/credit", m.getCredit)
	core.Route(http.MethodGet, "/state", m.getState)
	return nil
}

// viewState returns the derived state a view route's ?branch= asks for
// (Server.ViewState).
func (m *Module) viewState(c echo.Context, v url.Values) (*state.State, error) {
	return m.core.ViewState(c.Request().Context(), v.Get("branch"))
}

// viewWeights is st's verifier weight function at now (the published trust
// and moderation snapshots; trust.VerifierWeight).
func viewWeights(st *state.State, now int64) tasks.WeightFunc {
	return trust.VerifierWeight(st.Trust.Current(now), st.Moderation.Current(now))
}

func (m *Module) getTrust(c echo.Context) error {
	v, err := httpx.Params(c, "include_withdrawn", "branch")
	if err != nil {
		return err
	}
	id, err := httpx.HexParam(c, "agent_id")
	if err != nil {
		return err
	}
	inc, err := httpx.BoolParam(v, "include_withdrawn")
	if err != nil {
		return err
	}
	st, err := m.viewState(c, v)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st.Trust.Current(m.core.Now()).Agent(id, inc))
}

func (m *Module) getTrustGraph(c echo.Context) error {
	v, err := httpx.Params(c, "offset", "limit", "branch")
	if err != nil {
		return err
	}
	st, err := m.viewState(c, v)
	if err != nil {
		return err
	}
	offset, err := httpx.IntParam(v, "offset", 0, 0, 1<<31)
	if err != nil {
		return err
	}
	limit, err := httpx.IntParam(v, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	snap := st.Trust.Current(m.core.Now())
	return c.JSON(http.StatusOK, map[string]any{
		"algorithm": trust.Algorithm, "at": snap.Now, "total": snap.GraphLen(),
		"iterations": snap.Iterations, "converged": snap.Converged,
		"agents": httpx.NonNil(snap.TrustGraph(int(offset), int(limit))),
	})
}

func (m *Module) getTrustReceived(c echo.Context) error {
	v, err := httpx.Params(c, "since", "min_score", "limit", "branch")
	if err != nil {
		return err
	}
	st, err := m.viewState(c, v)
	if err != nil {
		return err
	}
	id, err := httpx.HexParam(c, "agent_id")
	if err != nil {
		return err
	}
	since, err := httpx.IntParam(v, "since", 0, 0, protocol.MaxSafeInteger)
	if err != nil {
		return err
	}
	limit, err := httpx.IntParam(v, "limit", 50, 1, 500)
	if err != nil {
		return err
	}
	minScore := -1.0
	if m := v.Get("min_score"); m != "" {
		minScore, err = strconv.ParseFloat(m, 64)
		if err != nil || minScore < -1 || minScore > 1 {
			return protocol.Errorf(httpx.CodeBadParameter, "min_score must be a number from -1 to 1")
		}
	}
	r := st.Trust.TrustReceived(id, since, minScore, int(limit))
	return c.JSON(http.StatusOK, map[string]any{
		"agent_id": r.AgentID, "ts": m.core.Now(),
		"filter": map[string]any{"since_sec": since, "min_score": minScore, "limit": limit},
		"count":  r.Count, "score_sum": r.ScoreSum, "votes": httpx.NonNil(r.Votes),
	})
}

func (m *Module) getFlags(c echo.Context) error {
	v, err := httpx.Params(c, "branch")
	if err != nil {
		return err
	}
	st, err := m.viewState(c, v)
	if err != nil {
		return err
	}
	id, err := httpx.HexParam(c, "id")
	if err != nil {
		return err
	}
	if _, found, err := m.core.Log().Lookup(c.Request().Context(), id); err != nil {
		return err
	} else if !found {
		return protocol.Errorf(relay.CodeNotFound, "event %s not found", id)
	}
	em := st.Moderation.Current(m.core.Now()).Event(id)
	if em.Author == "" { // nobody flagged it: the view has not met it
		if em.Author, err = m.core.Log().Author(c.Request().Context(), id); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, em)
}

func (m *Module) getTask(c echo.Context) error {
	id, st, err := m.hexView(c, "task_id")
	if err != nil {
		return err
	}
	now := m.core.Now()
	t, ok := st.Tasks.Task(id, now, viewWeights(st, now))
	if !ok {
		return protocol.Errorf(relay.CodeNotFound, "task %s not found", id)
	}
	full, err := m.taskEvents(c.Request().Context(), t)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, taskAnswer{TaskView: t, taskEventsByKind: full})
}

func (m *Module) getTasks(c echo.Context) error {
	v, err := httpx.Params(c, "capability", "status", "requester", "provider", "limit", "branch")
	if err != nil {
		return err
	}
	f := tasks.Filter{Capability: v.Get("capability"), Status: tasks.Status(v.Get("status"))}
	if f.Status != "" && !f.Status.Valid() {
		return protocol.Errorf(httpx.CodeBadParameter, "status must be one of %v", tasks.Statuses)
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"requester", &f.Requester}, {"provider", &f.Provider}} {
		if x := v.Get(p.name); x != "" {
			if !protocol.IsHex64(x) {
				return protocol.Errorf(httpx.CodeBadParameter, "%s must be 64 lowercase hex characters", p.name)
			}
			*p.dst = x
		}
	}
	limit, err := httpx.IntParam(v, "limit", 50, 1, 500)
	if err != nil {
		return err
	}
	f.Limit = int(limit)
	st, err := m.viewState(c, v)
	if err != nil {
		return err
	}
	now := m.core.Now()
	list := st.Tasks.List(f, now, viewWeights(st, now))
	return c.JSON(http.StatusOK, map[string]any{"count": len(list), "tasks": httpx.NonNil(list)})
}

func (m *Module) getCredit(c echo.Context) error {
	id, st, err := m.hexView(c, "agent_id")
	if err != nil {
		return err
	}
	now := m.core.Now()
	return c.JSON(http.StatusOK, st.Credit.Account(id, now, viewWeights(st, now)))
}

// getState serves the derived-state digest at ?at= (unix seconds, default
// now), evaluated at the whole minute (trust.EvalTime).
func (m *Module) getState(c echo.Context) error {
	v, err := httpx.Params(c, "at", "branch")
	if err != nil {
		return err
	}
	at, err := httpx.IntParam(v, "at", m.core.Now(), 0, protocol.MaxSafeInteger)
	if err != nil {
		return err
	}
	d, err := m.core.StateDigest(c.Request().Context(), v.Get("branch"), at)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// taskAnswer is GET /task/{id}: the derived view, plus the task's events
// in full, in thread order and by kind, under the names the reference
// relay serves and the network's clients read.
type taskAnswer struct {
	tasks.TaskView
	taskEventsByKind
}

type taskEventsByKind struct {
	Events   []*protocol.Event `json:"events"`
	Request  *protocol.Event   `json:"request"`
	Accepts  []*protocol.Event `json:"accepts"`
	Results  []*protocol.Event `json:"results"`
	Verifies []*protocol.Event `json:"verifies"`
	Payments []*protocol.Event `json:"payments"`
	Cancels  []*protocol.Event `json:"cancels"`
}

// taskEvents fetches every event of t from the log in one query and
// returns them by kind, in the thread's order.
func (m *Module) taskEvents(ctx context.Context, t tasks.TaskView) (taskEventsByKind, error) {
	out := taskEventsByKind{Events: []*protocol.Event{}, Accepts: []*protocol.Event{}, Results: []*protocol.Event{}, Verifies: []*protocol.Event{},
		Payments: []*protocol.Event{}, Cancels: []*protocol.Event{}}
	lists := map[int64]*[]*protocol.Event{protocol.KindTaskAccept: &out.Accepts, protocol.KindTaskResult: &out.Results,
		protocol.KindTaskVerify: &out.Verifies, protocol.KindPayment: &out.Payments, protocol.KindTaskCancel: &out.Cancels}
	ids := []string{t.TaskID}
	for _, ref := range t.Events {
		ids = append(ids, ref.EventID)
	}
	byID, err := m.core.EventsByID(ctx, ids)
	if err != nil {
		return out, err
	}
	out.Request = byID[t.TaskID]
	for _, ref := range t.Events {
		e := byID[ref.EventID]
		if e == nil {
			continue
		}
		out.Events = append(out.Events, e)
		if l := lists[ref.Kind]; l != nil {
			*l = append(*l, e)
		}
	}
	return out, nil
}

// hexView reads the 64-hex path parameter name and the view the request's
// branch parameter names (the live state without one).
func (m *Module) hexView(c echo.Context, name string) (string, *state.State, error) {
	v, err := httpx.Params(c, "branch")
	if err != nil {
		return "", nil, err
	}
	id, err := httpx.HexParam(c, name)
	if err != nil {
		return "", nil, err
	}
	st, err := m.viewState(c, v)
	return id, st, err
}
