package relay

import (
	"context"

	"github.com/anp2net/relay/relay/state"
)

// A Module is one capability of the relay, in its own package with two
// parts: a pure part (a fold over the log, no HTTP, no SQL) and an
// adapter (its routes, its background loops). It plugs into the core
// through this interface only; the modules a relay runs are listed in one
// place (cmd/anp2/modules.go) and handed to New in Config.Modules, so
// adding a capability is its package plus one line there.
//
// The core calls, in order: Fold (for a Folder) while building the
// composed state, before the stored log is folded; Mount once the core is
// built; Run (for a Runner) while Serve serves.
type Module interface {
	// Name names the module: its key among GET /state's views when its
	// fold is digested, and its name in logs.
	Name() string
	// Mount registers the module's routes and hooks on the core. An error
	// stops New.
	Mount(core *Server) error
}

// A Folder is a Module with a fold over the stored events. The composed
// state feeds it as it feeds the built-in views (every stored event its
// author has not revoked; a Remove when a revocation comes later), so the
// relay, a rebuild at start and `anp2 replay` derive the same state from
// the same events. A fold that is a state.Digester is part of /state.
type Folder interface {
	Module
	Fold() state.Fold
}

// A Runner is a Module with background work while the relay serves (a
// mirror loop, a refresher). Run returns when ctx ends.
type Runner interface {
	Module
	Run(ctx context.Context)
}

// Folds returns the named folds of the Folders among mods, for
// state.Options.Folds: the relay and the replayer build their state from
// the same list.
func Folds(mods []Module) []state.NamedFold {
	var out []state.NamedFold
	for _, m := range mods {
		if f, ok := m.(Folder); ok {
			out = append(out, state.NamedFold{Name: m.Name(), Fold: f.Fold()})
		}
	}
	return out
}
