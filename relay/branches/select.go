package branches

import (
	"context"
	"fmt"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/relay/state"
)

var _ relay.Branches = (*Module)(nil)

// Select implements relay.Branches for GET /events?branch= (SPEC §17.5).
func (m *Module) Select(ids []string, now int64) (func(*protocol.Event) (bool, string), []string, error) {
	if len(ids) == 0 {
		ids = []string{m.preferred()}
	}
	all := false
	for _, id := range ids {
		if all = all || id == "all"; id != "all" && !ValidBranchID(id) {
			return nil, nil, protocol.Errorf(httpx.CodeBadParameter, "branch %q is not main, all, pre-rollback-<8 to 16 hex> or b-<8 to 16 hex>", id)
		}
	}
	if all {
		return nil, nil, nil
	}
	v := m.fold.Current(now)
	want := map[string]bool{}
	var unknown []string
	for _, id := range ids {
		if v.Known(id) {
			want[id] = true
		} else {
			unknown = append(unknown, id)
		}
	}
	if v.Simple() && want["main"] {
		return nil, unknown, nil
	}
	return func(e *protocol.Event) (bool, string) {
		members := v.Members(e)
		for _, b := range members {
			if want[b] {
				return true, ""
			}
		}
		if len(members) > 0 {
			return false, members[0]
		}
		return false, ""
	}, unknown, nil
}

// State implements relay.Branches for GET /state?branch=: the state.v1
// digest at at of the events of branch (SPEC §17.5), from the preferred
// branch's live state when it is that branch under the same membership,
// else rebuilt from the log with fresh folds; an unknown branch is a 404.
func (m *Module) State(ctx context.Context, branch string, at int64) (state.Digest, error) {
	if !ValidBranchID(branch) {
		return state.Digest{}, protocol.Errorf(httpx.CodeBadParameter, "branch %q is not a branch id", branch)
	}
	v := m.fold.Current(at)
	if !v.Known(branch) {
		return state.Digest{}, protocol.Errorf(relay.CodeNotFound, "unknown branch %q", branch)
	}
	if st := m.liveFor(v, branch); st != nil {
		return st.Digest(at), nil
	}
	opts := m.stateOptions()
	r, err := m.scanned(v, fmt.Sprintf("state %s %d", branch, at), func() (any, error) {
		return BranchState(v, branch, at, opts, LogEvents(ctx, m.core.Log()))
	})
	if err != nil {
		return state.Digest{}, err
	}
	return r.(state.Digest), nil
}

// Views implements relay.Branches for the view routes' ?branch=: the
// state of branch's events under the view at now, rebuilt from the log
// and kept until an event is committed or the view changes. An unknown
// branch is a 404 not_found.
func (m *Module) Views(ctx context.Context, branch string, now int64) (*state.State, error) {
	if !ValidBranchID(branch) {
		return nil, protocol.Errorf(httpx.CodeBadParameter, "branch %q is not a branch id", branch)
	}
	v := m.fold.Current(now)
	if !v.Known(branch) {
		return nil, protocol.Errorf(relay.CodeNotFound, "unknown branch %q", branch)
	}
	if st := m.liveFor(v, branch); st != nil {
		return st, nil
	}
	opts := m.stateOptions()
	r, err := m.scanned(v, "views "+branch, func() (any, error) {
		return BranchFold(v, branch, opts, LogEvents(ctx, m.core.Log()))
	})
	if err != nil {
		return nil, err
	}
	return r.(*state.State), nil
}

// BranchState folds the events of branch under v, given by each, into a
// fresh state built with opts and returns its digest at at.
func BranchState(v *View, branch string, at int64, opts state.Options, each func(func(*protocol.Event) error) error) (state.Digest, error) {
	st, err := BranchFold(v, branch, opts, each)
	if err != nil {
		return state.Digest{}, err
	}
	return st.Digest(at), nil
}

// BranchFold folds the events of branch under v, given by each, into a
// fresh state built with opts.
func BranchFold(v *View, branch string, opts state.Options, each func(func(*protocol.Event) error) error) (*state.State, error) {
	var evs []*protocol.Event
	err := each(func(e *protocol.Event) error {
		if inBranch(v, branch, e) {
			evs = append(evs, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return fold(evs, opts), nil
}

// fold returns a fresh state of evs (revocations preloaded, so no lookup).
func fold(evs []*protocol.Event, opts state.Options) *state.State {
	st := state.New(opts)
	for _, e := range evs {
		st.Preload(e)
	}
	for i, e := range evs {
		st.Add(int64(i+1), e, nil)
	}
	return st
}

// preferred is the relay's preferred branch (relay.Config.PreferredBranch,
// default main).
func (m *Module) preferred() string {
	if m.core != nil && m.core.Config().PreferredBranch != "" {
		return m.core.Config().PreferredBranch
	}
	return "main"
}

// IDs implements relay.Branches: the branches this relay can answer for
// at now — its preferred branch first, then every branch of the view in
// its order (main, pre-rollback branches, voluntary forks).
func (m *Module) IDs(now int64) []string {
	out := []string{m.preferred()}
	for _, b := range m.fold.Current(now).Branches {
		if b.ID != out[0] {
			out = append(out, b.ID)
		}
	}
	return out
}
