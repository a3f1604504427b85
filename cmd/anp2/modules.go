package main

import (
	"github.com/anp2net/relay/a2a"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/liveness"
	"github.com/anp2net/relay/relay/stream"
)

// modules lists the capability modules every relay process runs: the one
// place a new capability is registered (see relay.Module). Each call
// returns fresh modules, so the auditor's replay folds into its own.
func modules() []relay.Module {
	return []relay.Module{
		directory.NewModule(),
		liveness.NewModule(liveness.Options{}),
		stream.NewModule(),
		a2a.NewModule(a2a.Options{}),
	}
}
