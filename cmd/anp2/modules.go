package main

import (
	"github.com/anp2net/relay/a2a"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/federation"
	"github.com/anp2net/relay/relay/liveness"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/stream"
)

// relayModules are the capability modules of one relay process, with the
// ones commands reach into by name.
type relayModules struct {
	all        []relay.Module
	federation *federation.Module
}

// modules lists the capability modules every relay process runs: the one
// place a new capability is registered (see relay.Module). Each call
// returns fresh modules, so the auditor's replay folds into its own. fed
// configures federation; it fails only on a malformed peer key.
func modules(fed federation.Options) (relayModules, error) {
	f, err := federation.NewModule(fed)
	if err != nil {
		return relayModules{}, err
	}
	return relayModules{federation: f, all: []relay.Module{
		directory.NewModule(),
		discovery.NewModule(),
		liveness.NewModule(liveness.Options{}),
		stream.NewModule(),
		a2a.NewModule(a2a.Options{}),
		f,
	}}, nil
}

// folds returns the registered modules' folds, for a replay.
func folds() []state.NamedFold {
	m, _ := modules(federation.DefaultOptions())
	return relay.Folds(m.all)
}
