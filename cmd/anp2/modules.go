package main

import (
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/anp2net/relay/a2a"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/appeals"
	"github.com/anp2net/relay/relay/branches"
	"github.com/anp2net/relay/relay/delivery"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/dms"
	"github.com/anp2net/relay/relay/explorer"
	"github.com/anp2net/relay/relay/federation"
	"github.com/anp2net/relay/relay/funding"
	"github.com/anp2net/relay/relay/governance"
	"github.com/anp2net/relay/relay/landing"
	"github.com/anp2net/relay/relay/liveness"
	"github.com/anp2net/relay/relay/mcp"
	"github.com/anp2net/relay/relay/redact"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/stream"
	"github.com/anp2net/relay/relay/tiers"
	"github.com/anp2net/relay/relay/tlog"
	"github.com/anp2net/relay/relay/views"
	"github.com/anp2net/relay/relay/ws"
)

// relayModules are the capability modules of one relay process, with the
// ones commands reach into by name.
type relayModules struct {
	all        []relay.Module
	federation *federation.Module
	funding    *funding.Module
	tiers      *tiers.Module
	tlog       *tlog.Module
	explorer   *explorer.Module
}

// modules lists the capability modules every relay process runs: the one
// place a new capability is registered (see relay.Module). Each call
// returns fresh modules, so the auditor's replay folds into its own. fed
// configures federation, gov the governance keys; it fails only on a
// malformed peer key or governance key. queue, when given and not "", is
// the delivery queue's file (ANP2_DELIVERY_DB wins; default beside the log).
func modules(fed federation.Options, gov governance.Options, queue ...string) (relayModules, error) {
	var g *governance.Module
	// A relay governance revoked (revoke_relay) is no peer of ours, and
	// its announcements stop counting.
	revokedRelay := func(keyOrURL string, at int64) bool {
		revoked := g.Governance().Sovereign(at).RevokedRelays
		return slices.ContainsFunc(revoked, func(r string) bool { return strings.TrimRight(r, "/") == keyOrURL })
	}
	fed.RevokedRelay = revokedRelay
	var tl *tlog.Module
	// The kind 10 carries the transparency log's latest checkpoint (§6.1).
	fed.TlogCheckpoint = func() (int64, string, bool) { return tl.Latest() }
	// GET /relays shows the witness's alarms against a relay (§21.5).
	fed.TlogAlarms = func(url string) int { return tl.Alarms(url) }
	f, err := federation.NewModule(fed)
	if err != nil {
		return relayModules{}, err
	}
	g, err = governance.NewModule(gov)
	if err != nil {
		return relayModules{}, err
	}
	fund := funding.NewModule(funding.Options{})
	tierOpts := tiers.DefaultOptions()
	tierOpts.Enabled = false // serve --new-agent-tiers turns it on
	tier := tiers.NewModule(tierOpts)
	// ANP2_WEBHOOK_ALLOW_PRIVATE=1: webhooks may target loopback and private
	// addresses over plain http (a receiver on the relay's own network).
	// ANP2_DELIVERY_DB: the delivery queue's SQLite file (default <db>.delivery,
	// or, beside a PostgreSQL log, <relay key file>.delivery: see serve).
	path := os.Getenv("ANP2_DELIVERY_DB")
	if path == "" && len(queue) > 0 {
		path = queue[0]
	}
	// ANP2_TRIGGER_POW: the proof of work a trigger registration costs, in
	// leading zero bits of its Authorization event's id (default 20; 0
	// for none).
	triggerPoW := 20
	if v, err := strconv.Atoi(os.Getenv("ANP2_TRIGGER_POW")); err == nil && v >= 0 {
		triggerPoW = v
	}
	push := delivery.NewModule(delivery.Options{AllowPrivate: os.Getenv("ANP2_WEBHOOK_ALLOW_PRIVATE") == "1", Path: path,
		TriggerPoW: triggerPoW})
	streamOpts, wsOpts, err := readerLimits()
	if err != nil {
		return relayModules{}, err
	}
	// ANP2_TLOG_PATH: the transparency log's tree file (default <db>.tlog,
	// or, beside a PostgreSQL log, <relay key file>.tlog).
	tlogPath := os.Getenv("ANP2_TLOG_PATH")
	if tlogPath == "" && len(queue) > 0 && queue[0] != "" {
		tlogPath = strings.TrimSuffix(queue[0], ".delivery") + ".tlog"
	}
	st := stream.NewModuleWith(streamOpts)
	disc := discovery.NewModule()
	tl = tlog.NewModule(tlog.Options{Path: tlogPath})
	ex := explorer.NewModule()
	dir := directory.NewModule().SetResolver(f.ResolveProfile)  // GET /agents/{id}?resolve=true through federation
	land := landing.NewModule().SetStats(dir.Directory().Stats) // /heartbeat.md lists /stats' counts
	return relayModules{federation: f, funding: fund, tiers: tier, tlog: tl, explorer: ex, all: []relay.Module{
		views.NewModule(), // trust, flags, tasks, credit, /state: mounted first, as when the core served them
		push,              // before a2a, which delivers task updates through it
		dir,
		disc,
		discovery.NewIntro(disc),       // §12.6 introduction beacons, signed by the relay
		discovery.NewFeedPush(disc, 0), // §12.5 kind 1200 feeds for agents that ask
		liveness.NewModule(liveness.Options{}),
		st,
		// GET /appeals and its notices to high-trust readers' streams (§7.3)
		appeals.NewModule(appeals.Options{Notifier: func() appeals.Notifier {
			if h := st.Hub(); h != nil {
				return h
			}
			return nil
		}}),
		ws.NewModule(wsOpts),
		// ANP2_SPEC_PATH: the SPEC.md whose sections /mcp serves as resources.
		mcp.NewModule(mcp.Options{SpecPath: os.Getenv("ANP2_SPEC_PATH")}),
		a2a.NewModule(a2a.Options{Push: push}),
		fund,
		tier,
		f,
		dms.NewModule(),
		ex,   // the web explorer at / for browsers (SPEC §19)
		land, // /llms.txt, /heartbeat.md, /openapi.json (SPEC §3.7)
		g,
		tl,                 // the log as a transparency log (SPEC §21)
		redact.NewModule(), // withheld events: the index, the 451 publish gate, GET /withheld (SPEC §21.8)
		branches.NewModule(branches.Options{Folds: func() []state.NamedFold { fl, _ := folds(gov); return fl },
			Sovereign: sovereignRollbacks(g), RevokedRelay: revokedRelay}),
	}}, nil
}

// folds returns the registered modules' folds, for a replay under the
// governance keys gov.
func folds(gov governance.Options) ([]state.NamedFold, error) {
	m, err := modules(federation.DefaultOptions(), gov)
	return relay.Folds(m.all), err
}

// sovereignRollbacks feeds the branches module the rollbacks governance's
// valid rollback_to acts ordered (seed §15, SPEC §13 and §17).
func sovereignRollbacks(g *governance.Module) func(at int64) []branches.SovereignRollback {
	return func(at int64) []branches.SovereignRollback {
		var out []branches.SovereignRollback
		for _, a := range g.Governance().Log() {
			if a.Valid && a.Act == governance.ActRollback && a.CreatedAt <= at && len(a.Targets) > 0 {
				out = append(out, branches.SovereignRollback{ActID: a.ID, At: a.CreatedAt, Checkpoint: a.Targets[0]})
			}
		}
		return out
	}
}
