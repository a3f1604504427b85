package main

import (
	"os"

	"github.com/anp2net/relay/a2a"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/delivery"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/dms"
	"github.com/anp2net/relay/relay/federation"
	"github.com/anp2net/relay/relay/liveness"
	"github.com/anp2net/relay/relay/mcp"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/stream"
	"github.com/anp2net/relay/relay/ws"
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
	// ANP2_WEBHOOK_ALLOW_PRIVATE=1: webhooks may target loopback and private
	// addresses over plain http (a receiver on the relay's own network).
	push := delivery.NewModule(delivery.Options{AllowPrivate: os.Getenv("ANP2_WEBHOOK_ALLOW_PRIVATE") == "1"})
	return relayModules{federation: f, all: []relay.Module{
		push, // before a2a, which delivers task updates through it
		directory.NewModule(),
		liveness.NewModule(liveness.Options{}),
		stream.NewModule(),
		ws.NewModule(ws.Options{}),
		// ANP2_SPEC_PATH: the SPEC.md whose sections /mcp serves as resources.
		mcp.NewModule(mcp.Options{SpecPath: os.Getenv("ANP2_SPEC_PATH")}),
		a2a.NewModule(a2a.Options{Push: push}),
		f,
		dms.NewModule(),
	}}, nil
}

// folds returns the registered modules' folds, for a replay.
func folds() []state.NamedFold {
	m, _ := modules(federation.DefaultOptions())
	return relay.Folds(m.all)
}
