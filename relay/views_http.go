package relay

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/trust"
	"github.com/labstack/echo/v4"
)

func (s *Server) viewRoutes() {
	s.route(http.MethodGet, "/trust/:agent_id", s.getTrust)
	s.route(http.MethodGet, "/trust_graph", s.getTrustGraph)
	s.route(http.MethodGet, "/agents/:agent_id/trust_received", s.getTrustReceived)
	s.route(http.MethodGet, "/events/:id/flags", s.getFlags)
	s.route(http.MethodGet, "/task/:task_id", s.getTask)
	s.route(http.MethodGet, "/tasks", s.getTasks)
	s.route(http.MethodGet, "/agents/:agent_id/credit", s.getCredit)
	s.route(http.MethodGet, "/state", s.getState)
}

// params rejects any query parameter not in allowed and any given twice.
func params(c echo.Context, allowed ...string) (url.Values, error) {
	v := c.QueryParams()
	for name, vals := range v {
		ok := false
		for _, a := range allowed {
			ok = ok || a == name
		}
		if !ok {
			return nil, protocol.Errorf(CodeUnknownParam, "unknown query parameter %q", name)
		}
		if len(vals) != 1 {
			return nil, protocol.Errorf(CodeBadParameter, "parameter %q given %d times", name, len(vals))
		}
	}
	return v, nil
}

// hexParam returns the path parameter name, which must be 64 lowercase hex.
func hexParam(c echo.Context, name string) (string, error) {
	v := c.Param(name)
	if !protocol.IsHex64(v) {
		return "", protocol.Errorf(CodeBadParameter, "%s must be 64 lowercase hex characters", name)
	}
	return v, nil
}

// intParam parses an optional integer parameter within [lo, hi].
func intParam(v url.Values, name string, def, lo, hi int64) (int64, error) {
	s := v.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, protocol.Errorf(CodeBadParameter, "%s must be an integer from %d to %d", name, lo, hi)
	}
	return n, nil
}

func (s *Server) now() int64 { return s.cfg.Now().Unix() }

func (s *Server) getTrust(c echo.Context) error {
	v, err := params(c, "include_withdrawn", "branch")
	if err != nil {
		return err
	}
	id, err := hexParam(c, "agent_id")
	if err != nil {
		return err
	}
	inc, err := boolParam(v, "include_withdrawn")
	if err != nil {
		return err
	}
	st, err := s.viewState(c, v)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st.Trust.Current(s.now()).Agent(id, inc))
}

func (s *Server) getTrustGraph(c echo.Context) error {
	v, err := params(c, "offset", "limit", "branch")
	if err != nil {
		return err
	}
	st, err := s.viewState(c, v)
	if err != nil {
		return err
	}
	offset, err := intParam(v, "offset", 0, 0, 1<<31)
	if err != nil {
		return err
	}
	limit, err := intParam(v, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	snap := st.Trust.Current(s.now())
	return c.JSON(http.StatusOK, map[string]any{
		"algorithm": trust.Algorithm, "at": snap.Now, "total": snap.GraphLen(),
		"iterations": snap.Iterations, "converged": snap.Converged,
		"agents": nonNil(snap.TrustGraph(int(offset), int(limit))),
	})
}

func (s *Server) getTrustReceived(c echo.Context) error {
	v, err := params(c, "since", "min_score", "limit", "branch")
	if err != nil {
		return err
	}
	st, err := s.viewState(c, v)
	if err != nil {
		return err
	}
	id, err := hexParam(c, "agent_id")
	if err != nil {
		return err
	}
	since, err := intParam(v, "since", 0, 0, protocol.MaxSafeInteger)
	if err != nil {
		return err
	}
	limit, err := intParam(v, "limit", 50, 1, 500)
	if err != nil {
		return err
	}
	minScore := -1.0
	if m := v.Get("min_score"); m != "" {
		minScore, err = strconv.ParseFloat(m, 64)
		if err != nil || minScore < -1 || minScore > 1 {
			return protocol.Errorf(CodeBadParameter, "min_score must be a number from -1 to 1")
		}
	}
	r := st.Trust.TrustReceived(id, since, minScore, int(limit))
	return c.JSON(http.StatusOK, map[string]any{
		"agent_id": r.AgentID, "ts": s.now(),
		"filter": map[string]any{"since_sec": since, "min_score": minScore, "limit": limit},
		"count":  r.Count, "score_sum": r.ScoreSum, "votes": nonNil(r.Votes),
	})
}

func (s *Server) getFlags(c echo.Context) error {
	v, err := params(c, "branch")
	if err != nil {
		return err
	}
	st, err := s.viewState(c, v)
	if err != nil {
		return err
	}
	id, err := hexParam(c, "id")
	if err != nil {
		return err
	}
	if _, found, err := s.store.Lookup(c.Request().Context(), id); err != nil {
		return err
	} else if !found {
		return protocol.Errorf(CodeNotFound, "event %s not found", id)
	}
	em := st.Moderation.Current(s.now()).Event(id)
	if em.Author == "" { // nobody flagged it: the view has not met it
		if em.Author, err = s.store.Author(c.Request().Context(), id); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, em)
}

func (s *Server) getTask(c echo.Context) error {
	v, err := params(c, "branch")
	if err != nil {
		return err
	}
	id, err := hexParam(c, "task_id")
	if err != nil {
		return err
	}
	st, err := s.viewState(c, v)
	if err != nil {
		return err
	}
	now := s.now()
	t, ok := st.Tasks.Task(id, now, verifierWeights(st, now))
	if !ok {
		return protocol.Errorf(CodeNotFound, "task %s not found", id)
	}
	full, err := s.taskEvents(c.Request().Context(), t)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, taskAnswer{TaskView: t, taskEventsByKind: full})
}

func (s *Server) getTasks(c echo.Context) error {
	v, err := params(c, "capability", "status", "requester", "provider", "limit", "branch")
	if err != nil {
		return err
	}
	f := tasks.Filter{Capability: v.Get("capability"), Status: tasks.Status(v.Get("status"))}
	if f.Status != "" && !f.Status.Valid() {
		return protocol.Errorf(CodeBadParameter, "status must be one of %v", tasks.Statuses)
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"requester", &f.Requester}, {"provider", &f.Provider}} {
		if x := v.Get(p.name); x != "" {
			if !protocol.IsHex64(x) {
				return protocol.Errorf(CodeBadParameter, "%s must be 64 lowercase hex characters", p.name)
			}
			*p.dst = x
		}
	}
	limit, err := intParam(v, "limit", 50, 1, 500)
	if err != nil {
		return err
	}
	f.Limit = int(limit)
	st, err := s.viewState(c, v)
	if err != nil {
		return err
	}
	now := s.now()
	list := st.Tasks.List(f, now, verifierWeights(st, now))
	return c.JSON(http.StatusOK, map[string]any{"count": len(list), "tasks": nonNil(list)})
}

func (s *Server) getCredit(c echo.Context) error {
	v, err := params(c, "branch")
	if err != nil {
		return err
	}
	id, err := hexParam(c, "agent_id")
	if err != nil {
		return err
	}
	st, err := s.viewState(c, v)
	if err != nil {
		return err
	}
	now := s.now()
	return c.JSON(http.StatusOK, st.Credit.Account(id, now, verifierWeights(st, now)))
}

// getState serves the derived-state digest at ?at= (unix seconds, default
// now), evaluated at the whole minute (trust.EvalTime).
func (s *Server) getState(c echo.Context) error {
	v, err := params(c, "at", "branch")
	if err != nil {
		return err
	}
	at, err := intParam(v, "at", s.now(), 0, protocol.MaxSafeInteger)
	if err != nil {
		return err
	}
	if b := v.Get("branch"); b != "" && b != "all" {
		if s.branches == nil {
			return protocol.Errorf(CodeBadParameter, "this relay serves no branches")
		}
		d, err := s.branches.State(c.Request().Context(), b, at)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, d)
	}
	return c.JSON(http.StatusOK, s.state.Digest(at))
}

// nonNil turns a nil slice into an empty one so JSON shows [] not null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
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
func (s *Server) taskEvents(ctx context.Context, t tasks.TaskView) (taskEventsByKind, error) {
	out := taskEventsByKind{Events: []*protocol.Event{}, Accepts: []*protocol.Event{}, Results: []*protocol.Event{}, Verifies: []*protocol.Event{},
		Payments: []*protocol.Event{}, Cancels: []*protocol.Event{}}
	lists := map[int64]*[]*protocol.Event{protocol.KindTaskAccept: &out.Accepts, protocol.KindTaskResult: &out.Results,
		protocol.KindTaskVerify: &out.Verifies, protocol.KindPayment: &out.Payments, protocol.KindTaskCancel: &out.Cancels}
	ids := []string{t.TaskID}
	for _, ref := range t.Events {
		ids = append(ids, ref.EventID)
	}
	byID, err := s.EventsByID(ctx, ids)
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

// EventsByID reads the stored events with ids (revoked ones included) in
// one query per thousand; ids not stored are absent from the map.
func (s *Server) EventsByID(ctx context.Context, ids []string) (map[string]*protocol.Event, error) {
	out := make(map[string]*protocol.Event, len(ids))
	for lo := 0; lo < len(ids); lo += 1000 {
		chunk := ids[lo:min(len(ids), lo+1000)]
		bodies, err := s.store.Query(ctx, eventlog.Filter{IDs: chunk, IncludeRevoked: true, Limit: len(chunk)})
		if err != nil {
			return nil, err
		}
		for _, b := range bodies {
			if e, err := protocol.DecodeJSON(b); err == nil {
				out[e.ID] = e
			}
		}
	}
	return out, nil
}
