package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/branches"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/federation"
	"github.com/anp2net/relay/relay/funding"
	"github.com/anp2net/relay/relay/tiers"
	"github.com/anp2net/relay/relay/tlog"
)

// serveCmd runs the relay. Tests drive it through ParseFlags, Start, Addr
// and Close to run the real server on 127.0.0.1:0.
type serveCmd struct {
	out, errw io.Writer

	addr, db, publicURL, proxies string
	rateAgent, rateIP, rateAuth  int
	ipv6Prefix                   int
	idleTimeout, bodyTimeout     time.Duration
	peerRate, syncRate           int
	treasury, relayKey           string
	peers, peerKeys              listFlag
	tlogWitness, tlogWitnessed   listFlag
	honorRedactions              listFlag
	mirrorEvery, operatorReport  time.Duration
	infraCosts, seedWhitelist    string
	operatorFunding, branch      string
	topics                       string
	newAgentTiers                bool
	verifyAnchors                bool
	standing                     tiers.StandingOptions
	gov                          govFlags
	scale                        scaleFlags
	now                          func() time.Time

	store eventlog.Log
	// mods are the modules the relay runs (closed by Close).
	mods []relay.Module
	ln   net.Listener
	srv  *relay.Server
	fed  *federation.Module // the federation module (mirroring)
	log  *slog.Logger
}

func newServe(out, errw io.Writer) *serveCmd { return &serveCmd{out: out, errw: errw, now: time.Now} }

func (c *serveCmd) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(c.errw)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&c.db, "db", "./anp2.db", "the event log: a SQLite file (a path or sqlite:PATH), or a PostgreSQL URL postgres://user:pass@host/db")
	fs.StringVar(&c.publicURL, "public-base-url", "", "public base URL for absolute links (default http://<addr>)")
	fs.StringVar(&c.proxies, "trusted-proxies", "", "comma-separated CIDRs whose X-Forwarded-For is trusted")
	fs.IntVar(&c.ipv6Prefix, "ipv6-prefix", 64, "prefix length by which IPv6 clients are keyed in every per-address limit (1 to 128; 128 = each address alone)")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", 60*time.Second, "close a keep-alive connection idle this long between requests (negative = never)")
	fs.DurationVar(&c.bodyTimeout, "body-timeout", 30*time.Second, "a request body not received this long after its headers is a 408 and the connection is closed (negative = no limit)")
	fs.IntVar(&c.rateAgent, "rate-agent", 60, "events per agent per minute (0 = unlimited)")
	fs.IntVar(&c.rateIP, "rate-ip", 300, "events per source IP per minute (0 = unlimited)")
	fs.IntVar(&c.rateAuth, "rate-auth", 1200, "D4 Authorization headers checked per source IP per minute (0 = unlimited)")
	fs.IntVar(&c.peerRate, "peer-rate", 120000, "events per chosen peer key per minute through POST /gossip (0 = unlimited)")
	fs.IntVar(&c.syncRate, "sync-rate", 1200, fmt.Sprintf("POST /sync messages per peer address per minute, a filtered one counting %d (0 = unlimited)", federation.SyncFilterCost))
	fs.Var(&c.peers, "peer", "peer relay URL to mirror continuously (repeatable)")
	fs.Var(&c.peerKeys, "peer-key", "agent_id of a peer relay whose signed POST /gossip is mirrored history (repeatable; a --peer relay's key is read from its own GET /relays)")
	fs.Var(&c.tlogWitness, "tlog-witness", "URL=KEY: a witness asked to cosign each new checkpoint of this relay's transparency log, KEY its GET /tlog/witness/key (repeatable)")
	fs.Var(&c.tlogWitnessed, "tlog-witnessed", "the GET /tlog/key of a relay whose checkpoints this relay witnesses at POST /tlog/witness/add-checkpoint (repeatable)")
	fs.Var(&c.honorRedactions, "honor-redactions", "agent_id of a peer relay whose kind 25 redactions this relay applies too: the events they name are withheld here (451) and left out of every view (SPEC §21.8; this relay's own are always applied; repeatable)")
	fs.StringVar(&c.topics, "topics", "", fmt.Sprintf("comma-separated topics or capabilities this relay specialises in, announced in its kind 10 so other relays resolve agents of those capabilities here first (seed §12.9.2 topic relay; at most %d, each at most %d bytes)", federation.MaxTopics, federation.MaxTopicLen))
	fs.DurationVar(&c.mirrorEvery, "mirror-interval", 5*time.Second, "pause between reconciliations with each peer")
	fs.StringVar(&c.relayKey, "relay-key", "", "the relay's own key file, created at first start (default <db>.relay-key; with PostgreSQL ./anp2.relay-key: give every process over one database the same file)")
	fs.DurationVar(&c.operatorReport, "operator-report", 0, "publish a kind 22 capacity report signed by the relay key every period, e.g. 24h (0 = never)")
	fs.StringVar(&c.infraCosts, "operator-infra-costs-usd", "0.00", "the operator's declared infrastructure cost per report period, in USD")
	fs.StringVar(&c.operatorFunding, "operator-funding", "", "the relay operator agent's kind 16 content (JSON with addresses), published signed by the relay key when it changes")
	fs.BoolVar(&c.verifyAnchors, "explorer-verify-anchors", false, "let the web explorer fetch profiles' human_anchor verification URLs (public addresses only) to show whether they verify (seed §4.1.1; off: the relay fetches nothing)")
	fs.BoolVar(&c.newAgentTiers, "new-agent-tiers", false, "apply seed §8.1's new-agent tiers to publishes (30/min, 60 s reply cooldown, 1 room a day for agents whose first profile is under 24 h old)")
	fs.StringVar(&c.seedWhitelist, "seed-agent-whitelist", "", "comma-separated agent_ids exempt from the new-agent tiers")
	c.standing = tiers.DefaultStandingOptions()
	fs.BoolVar(&c.standing.Bypass, "standing-pow-bypass", false, "let agents whose standing meets --standing-pow-threshold publish kinds 0 and 50 without the mandatory PoW (seed §8.2; refused unless --standing-min-verifiers is 2 or more, and with a PostgreSQL log)")
	fs.IntVar(&c.standing.Threshold, "standing-pow-threshold", tiers.DefaultStandingThreshold, "confirmed provider tasks an agent needs for the PoW bypass")
	fs.IntVar(&c.standing.MinVerifiers, "standing-min-verifiers", 1, "distinct neutral verifiers of positive trust that must pass a task for it to count toward standing (2 or more: multi-verifier consensus)")
	fs.StringVar(&c.treasury, "treasury", "", "credit treasury agent_id (default the public network's)")
	c.gov.register(fs)
	c.scale.register(fs)
	fs.StringVar(&c.branch, "branch", "main", "the branch served by default and announced as preferred (main, pre-rollback-<hex>, b-<hex>; SPEC §17.5)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if c.ipv6Prefix < 1 || c.ipv6Prefix > 128 {
		return fmt.Errorf("--ipv6-prefix %d is not a prefix length from 1 to 128", c.ipv6Prefix)
	}
	if c.idleTimeout == 0 || c.bodyTimeout == 0 {
		return fmt.Errorf("--idle-timeout and --body-timeout must not be 0 (a negative value means no limit)")
	}
	if err := c.scale.validate(); err != nil {
		return err
	}
	for _, k := range c.honorRedactions {
		if !protocol.IsHex64(k) {
			return fmt.Errorf("--honor-redactions %q is not a relay's agent_id (64 lowercase hex)", k)
		}
	}
	if !branches.ValidBranchID(c.branch) {
		return fmt.Errorf("--branch %q is not main, pre-rollback-<8 to 16 hex> or b-<8 to 16 hex>", c.branch)
	}
	return c.checkStanding()
}

// Start opens the log and begins listening; Run waits for ctx to end.
func (c *serveCmd) Start() error {
	c.log = slog.New(slog.NewTextHandler(c.errw, nil))
	stateDir, err := c.scale.stateDirFor(c.db)
	if err != nil {
		return err
	}
	st, err := openLog(context.Background(), c.db, func(work string) {
		c.log.Info("repairing the log before serving", "db", c.db, "work", work)
	})
	if err != nil {
		return damaged(c.db, err)
	}
	c.store = st
	cfg := relay.DefaultConfig()
	cfg.Now, cfg.Logger = c.now, c.log
	cfg.StateDir = stateDir
	cfg.RatePerAgent, cfg.RatePerIP, cfg.RatePerAuth = c.rateAgent, c.rateIP, c.rateAuth
	cfg.AgentRates = agentRates(st)
	cfg.IPv6Prefix, cfg.IdleTimeout, cfg.BodyTimeout = c.ipv6Prefix, c.idleTimeout, c.bodyTimeout
	if c.proxies != "" {
		cfg.TrustedProxies = strings.Split(c.proxies, ",")
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		st.Close()
		return fmt.Errorf("listen: %w", err)
	}
	c.ln = ln
	cfg.PublicBaseURL = c.publicURL
	if cfg.PublicBaseURL == "" {
		cfg.PublicBaseURL = "http://" + ln.Addr().String()
		if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil && ap.Addr().IsUnspecified() {
			c.log.Warn("listening on every address without --public-base-url: links name no reachable host, and D4 headers must name the address each client connected to; set --public-base-url", "addr", ln.Addr().String())
		}
	}
	prog := newProgress(c.errw)
	rebuildStart := time.Now()
	cfg.OnRebuild = func(done, total int64) {
		prog.update("rebuilding derived state: seq %d/%d (%.0f events/s)", done, total, float64(done)/time.Since(rebuildStart).Seconds())
	}
	cfg.Treasury = c.treasury
	cfg.PreferredBranch = c.branch
	cfg.HonorRedactions = c.honorRedactions
	fed := federation.DefaultOptions()
	fed.Peers, fed.PeerKeys, fed.MirrorInterval = c.peers, c.peerKeys, c.mirrorEvery
	fed.PeerRate, fed.SyncRate = c.peerRate, c.syncRate
	fed.Topics = splitTopics(c.topics)
	gov, err := c.gov.options()
	if err != nil {
		ln.Close()
		st.Close()
		return err
	}
	mods, err := modules(fed, gov, deliveryQueue(c.db, c.relayKey))
	if err != nil {
		ln.Close()
		st.Close()
		return err
	}
	cfg.Modules, c.fed, c.mods = mods.all, mods.federation, mods.all
	if stateDir == "" {
		// No saved state: a module's own state files (discovery's store)
		// are temporary, removed at Close.
		for _, m := range mods.all {
			if o, ok := m.(relay.StateOpener); ok {
				if err := o.OpenState(""); err != nil {
					ln.Close()
					c.Close()
					return err
				}
			}
		}
	}
	var witnesses []tlog.Witness
	for _, w := range c.tlogWitness {
		u, k, ok := strings.Cut(w, "=")
		if !ok {
			ln.Close()
			st.Close()
			return fmt.Errorf("--tlog-witness %q: want URL=KEY", w)
		}
		witnesses = append(witnesses, tlog.Witness{URL: u, Key: k})
	}
	if c.verifyAnchors {
		mods.explorer.VerifyAnchors(nil) // client.AnchorHTTPClient: public addresses only
	}
	// The peers it mirrors are witnessed too (SPEC §21.5).
	mods.tlog.SetWitnessing(witnesses, c.tlogWitnessed, c.peers)
	var treeStart time.Time
	mods.tlog.SetProgress(func(done, total int64) {
		if treeStart.IsZero() {
			treeStart = time.Now()
		}
		prog.update("building the transparency log's tree: %d/%d entries (%.0f/s)", done, total, float64(done)/time.Since(treeStart).Seconds())
	})
	report := funding.ReportOptions{Every: c.operatorReport, InfraCostsUSD: c.infraCosts, Funding: c.operatorFunding}
	if err := report.Validate(); err != nil {
		ln.Close()
		st.Close()
		return fmt.Errorf("operator report: %w", err)
	}
	mods.funding.SetReport(report)
	var whitelist []string
	for _, a := range strings.Split(c.whitelist(), ",") {
		if a = strings.TrimSpace(a); a != "" && !protocol.IsHex64(a) {
			ln.Close()
			st.Close()
			return fmt.Errorf("seed agent whitelist: %q is not a 64-hex agent_id", a)
		}
		whitelist = append(whitelist, a)
	}
	mods.tiers.Configure(c.newAgentTiers, whitelist)
	if err := mods.tiers.ConfigureStanding(c.standing); err != nil {
		ln.Close()
		st.Close()
		return err
	}
	if c.relayKey == "" {
		c.relayKey = relayKeyDefault(c.db)
	}
	if cfg.RelayKey, err = loadOrCreateKey(c.relayKey); err != nil {
		ln.Close()
		st.Close()
		return fmt.Errorf("relay key: %w", err)
	}
	srv, err := relay.New(cfg, st)
	prog.done()
	if err != nil {
		ln.Close()
		st.Close()
		return damaged(c.db, err)
	}
	c.srv = srv
	if err := c.scale.startDebug(c.log); err != nil {
		ln.Close()
		st.Close()
		return err
	}
	c.log.Info("derived state rebuilt", "seconds", time.Since(rebuildStart).Round(time.Millisecond).Seconds())
	if a, ok := st.(interface{ Announce(...string) error }); ok { // SQLite's writer lock names its holder
		a.Announce("addr=" + ln.Addr().String())
	}
	c.log.Info("relay listening", "addr", ln.Addr().String(), "db", dbLabel(c.db), "public_base_url", cfg.PublicBaseURL)
	return nil
}

// Addr is the address the relay listens on (after Start).
func (c *serveCmd) Addr() string { return c.ln.Addr().String() }

func (c *serveCmd) Run(ctx context.Context) error {
	if err := c.Start(); err != nil {
		return err
	}
	defer c.Close()
	go c.scale.saveEvery(ctx, c.srv, c.log)
	err := c.srv.Serve(ctx, c.ln)
	if serr := c.srv.SaveState(); serr != nil { // a clean stop saves
		c.log.Error("saving derived state", "err", serr)
	}
	c.log.Info("relay stopped")
	return err
}

// Close releases the modules' files (a module that is an io.Closer, such
// as the transparency log's tree) and then the log.
func (c *serveCmd) Close() error {
	c.scale.closeDebug()
	var err error
	for _, m := range c.mods {
		if cl, ok := m.(io.Closer); ok {
			err = errors.Join(err, cl.Close())
		}
	}
	c.mods = nil
	if c.store == nil {
		return err
	}
	return errors.Join(err, c.store.Close())
}

// checkStanding refuses the standing-based PoW bypass without
// multi-verifier consensus, and over a PostgreSQL log, whose several
// writer processes cannot judge standing under one lock (SPEC §12.1).
func (c *serveCmd) checkStanding() error {
	if err := c.standing.Validate(); err != nil {
		return err
	}
	if c.standing.Bypass && isPostgres(c.db) {
		return fmt.Errorf("--standing-pow-bypass needs the SQLite log: standing must be read under the writer lock of the insert, and a PostgreSQL log has one writer per process")
	}
	return nil
}

// whitelist is --seed-agent-whitelist (ANP2_SEED_AGENT_WHITELIST), else the
// reference relay's SEED_AGENT_WHITELIST (seed §8.1), so an operator's
// existing setting carries over.
func (c *serveCmd) whitelist() string {
	if c.seedWhitelist != "" {
		return c.seedWhitelist
	}
	return os.Getenv("SEED_AGENT_WHITELIST")
}

// splitTopics reads --topics: comma-separated, blanks trimmed, empty
// entries dropped (the federation module checks the rest).
func splitTopics(s string) []string {
	var out []string
	for t := range strings.SplitSeq(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}
