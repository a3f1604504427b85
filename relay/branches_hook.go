package relay

import (
	"context"
	"net/url"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/state"
	"github.com/labstack/echo/v4"
)

// Branches is what a module serving the branches of seed §11.3 gives the
// core for `?branch=` on GET /events and GET /state.
type Branches interface {
	// Select returns the membership test for a ?branch= list at now (an
	// empty list means the relay's preferred branch): keep nil keeps
	// every event, and for an event it leaves out names a branch the
	// event is in ("" if none); unknown lists the ids no branch has. A
	// malformed id is an error.
	Select(ids []string, now int64) (keep func(*protocol.Event) (bool, string), unknown []string, err error)
	// State returns the state digest of one branch's events at at.
	State(ctx context.Context, branch string, at int64) (state.Digest, error)
	// Views returns the derived state of one branch's events as of now,
	// for the view routes' ?branch=.
	Views(ctx context.Context, branch string, now int64) (*state.State, error)
	// Default returns the derived state of the relay's preferred branch as
	// of now, for the views without ?branch=: nil when the relay's own
	// state (every event) is that state.
	Default(ctx context.Context, now int64) (*state.State, error)
	// IDs lists the branches the relay can answer for as of now.
	IDs(now int64) []string
}

// viewState returns the derived state a view route's ?branch= asks for.
func (s *Server) viewState(c echo.Context, v url.Values) (*state.State, error) {
	return s.ViewState(c.Request().Context(), v.Get("branch"))
}

// ViewState returns the derived state the views answer from for branch
// (SPEC §17.5): "" is the relay's preferred branch (its own state while
// that holds every event), "all" the relay's own state of every event,
// another id that branch's state. A malformed id is a 400, an unknown one
// a 404; a failed rebuild from the log is an internal error.
func (s *Server) ViewState(ctx context.Context, branch string) (*state.State, error) {
	switch {
	case branch == "all" || branch == "" && s.branches == nil:
		return s.state, nil
	case s.branches == nil:
		return nil, protocol.Errorf(CodeBadParameter, "this relay serves no branches")
	case branch == "":
		st, err := s.branches.Default(ctx, s.now())
		if err != nil {
			return nil, err
		}
		if st == nil {
			return s.state, nil
		}
		return st, nil
	}
	return s.branches.Views(ctx, branch, s.now())
}

// StateDigest returns the state digest at at of branch (GET /state):
// "" and "all" are the relay's own state of every event, another id that
// branch's; a branch is a 400 on a relay that serves no branches.
func (s *Server) StateDigest(ctx context.Context, branch string, at int64) (state.Digest, error) {
	if branch == "" || branch == "all" {
		return s.state.Digest(at), nil
	}
	if s.branches == nil {
		return state.Digest{}, protocol.Errorf(CodeBadParameter, "this relay serves no branches")
	}
	return s.branches.State(ctx, branch, at)
}

// Views returns the derived state the views answer from by default: the
// relay's preferred branch's (SPEC §17.5), which is State() while the
// relay has one branch. Modules serving derived views read it; State()
// stays the state of every event (GET /state, the folds).
func (s *Server) Views() *state.State { return s.viewsState() }

// viewsState is ViewState(ctx, ""): the state of the preferred branch the
// views, moderation's hiding included, answer from by default. A failed
// rebuild from the log is logged and answered from every event.
func (s *Server) viewsState() *state.State {
	st, err := s.ViewState(context.Background(), "")
	if err != nil {
		s.cfg.Logger.Error("views: the preferred branch's state", "err", err)
		return s.state
	}
	return st
}

// NativeTasksIn answers task queries from branch's state (ViewState's
// rules and errors; "" is NativeTasks).
func (s *Server) NativeTasksIn(ctx context.Context, branch string) (TaskSource, error) {
	if branch == "" {
		return s.NativeTasks(), nil
	}
	st, err := s.ViewState(ctx, branch)
	return TaskSource{s: s, st: st}, err
}

// BranchIDs lists the branches this relay can answer for (its preferred
// one first), or nil when it serves no branches.
func (s *Server) BranchIDs() []string {
	if s.branches == nil {
		return nil
	}
	return s.branches.IDs(s.now())
}

// ServeBranches makes b judge ?branch= (one module; the last call wins).
// It must be called before the relay serves (from Mount).
func (s *Server) ServeBranches(b Branches) { s.branches = b }

// BranchFilter returns the membership test of a ?branch= list (empty: the
// relay's preferred branch; "all": every event) as of now, for a stream:
// keep is nil when every event is kept (no branches module, or no branch
// leaves anything out); unknown lists the ids no branch has. A list is an
// error on a relay that serves no branches, as on GET /events.
func (s *Server) BranchFilter(ids []string) (keep func(*protocol.Event) bool, unknown []string, err error) {
	if s.branches == nil {
		if len(ids) > 0 && !(len(ids) == 1 && ids[0] == "all") {
			return nil, nil, protocol.Errorf(CodeBadParameter, "this relay serves no branches")
		}
		return nil, nil, nil
	}
	sel, unknown, err := s.branches.Select(ids, s.now())
	if err != nil || sel == nil {
		return nil, unknown, err
	}
	return func(e *protocol.Event) bool { ok, _ := sel(e); return ok }, unknown, nil
}

// HeaderBranchUnknown names the requested branches no branch has.
const HeaderBranchUnknown = "X-ANP-Branch-Unknown"

// onBranches keeps the bodies in the requested branches; with
// placeholders (a thread query), an event of another branch becomes
// ["cross-branch", id, branch] (§11.3.6). Omitting branch means the
// preferred branch for every query (seed §11.3.3, "same as omitting"),
// lookups by ids and the raw include_revoked view included: mirrors and
// auditors ask branch=all.
func (s *Server) onBranches(c echo.Context, q Query, bodies [][]byte, placeholders bool) ([][]byte, error) {
	ids := q.Branches
	if s.branches == nil {
		if len(ids) > 0 && !(len(ids) == 1 && ids[0] == "all") {
			return nil, protocol.Errorf(CodeBadParameter, "this relay serves no branches")
		}
		return bodies, nil
	}
	keep, unknown, err := s.branches.Select(ids, s.now())
	if err != nil {
		return nil, err
	}
	if len(unknown) > 0 {
		c.Response().Header().Set(HeaderBranchUnknown, strings.Join(unknown, ","))
	}
	if keep == nil {
		return bodies, nil
	}
	out := bodies[:0:0]
	for _, b := range bodies {
		e, err := protocol.DecodeJSON(b)
		if err != nil {
			continue
		}
		if ok, other := keep(e); ok {
			out = append(out, b)
		} else if placeholders && other != "" {
			out = append(out, []byte(`["cross-branch","`+e.ID+`","`+other+`"]`))
		}
	}
	return out, nil
}

// exportBranches returns the membership test for GET /export?branch=
// (nil: the whole log, the default and branch=all).
func (s *Server) exportBranches(c echo.Context, list string) (func(*protocol.Event) (bool, string), error) {
	if list == "" {
		return nil, nil
	}
	if s.branches == nil {
		return nil, protocol.Errorf(CodeBadParameter, "this relay serves no branches")
	}
	keep, unknown, err := s.branches.Select(strings.Split(list, ","), s.now())
	if err != nil {
		return nil, err
	}
	if len(unknown) > 0 {
		c.Response().Header().Set(HeaderBranchUnknown, strings.Join(unknown, ","))
	}
	return keep, nil
}
