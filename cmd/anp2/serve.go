package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/federation"
)

// serveCmd runs the relay. Tests drive it through ParseFlags, Start, Addr
// and Close to run the real server on 127.0.0.1:0.
type serveCmd struct {
	out, errw io.Writer

	addr, db, publicURL, proxies string
	rateAgent, rateIP, rateAuth  int
	peerRate, syncRate           int
	treasury, relayKey           string
	peers, peerKeys              listFlag
	mirrorEvery                  time.Duration
	now                          func() time.Time

	store eventlog.Log
	ln    net.Listener
	srv   *relay.Server
	fed   *federation.Module // the federation module (mirroring)
	log   *slog.Logger
}

func newServe(out, errw io.Writer) *serveCmd { return &serveCmd{out: out, errw: errw, now: time.Now} }

func (c *serveCmd) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(c.errw)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&c.db, "db", "./anp2.db", "the event log: a SQLite file (a path or sqlite:PATH), or a PostgreSQL URL postgres://user:pass@host/db")
	fs.StringVar(&c.publicURL, "public-base-url", "", "public base URL for absolute links (default http://<addr>)")
	fs.StringVar(&c.proxies, "trusted-proxies", "", "comma-separated CIDRs whose X-Forwarded-For is trusted")
	fs.IntVar(&c.rateAgent, "rate-agent", 60, "events per agent per minute (0 = unlimited)")
	fs.IntVar(&c.rateIP, "rate-ip", 300, "events per source IP per minute (0 = unlimited)")
	fs.IntVar(&c.rateAuth, "rate-auth", 1200, "D4 Authorization headers checked per source IP per minute (0 = unlimited)")
	fs.IntVar(&c.peerRate, "peer-rate", 120000, "events per peer address per minute through POST /gossip (0 = unlimited)")
	fs.IntVar(&c.syncRate, "sync-rate", 1200, fmt.Sprintf("POST /sync messages per peer address per minute, a filtered one counting %d (0 = unlimited)", federation.SyncFilterCost))
	fs.Var(&c.peers, "peer", "peer relay URL to mirror continuously (repeatable)")
	fs.Var(&c.peerKeys, "peer-key", "agent_id of a peer relay whose signed POST /gossip is mirrored history (repeatable; --peer relays' keys are learned)")
	fs.DurationVar(&c.mirrorEvery, "mirror-interval", 5*time.Second, "pause between reconciliations with each peer")
	fs.StringVar(&c.relayKey, "relay-key", "", "the relay's own key file, created at first start (default <db>.relay-key; with PostgreSQL ./anp2.relay-key: give every process over one database the same file)")
	fs.StringVar(&c.treasury, "treasury", "", "credit treasury agent_id (default the public network's)")
	return parse(fs, args)
}

// Start opens the log and begins listening; Run waits for ctx to end.
func (c *serveCmd) Start() error {
	c.log = slog.New(slog.NewTextHandler(c.errw, nil))
	st, err := openLog(context.Background(), c.db, func(work string) {
		c.log.Info("repairing the log before serving", "db", c.db, "work", work)
	})
	if err != nil {
		return err
	}
	c.store = st
	cfg := relay.DefaultConfig()
	cfg.Now, cfg.Logger = c.now, c.log
	cfg.RatePerAgent, cfg.RatePerIP, cfg.RatePerAuth = c.rateAgent, c.rateIP, c.rateAuth
	cfg.AgentRates = agentRates(st)
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
	}
	prog := newProgress(c.errw)
	rebuildStart := time.Now()
	cfg.OnRebuild = func(done, total int64) {
		prog.update("rebuilding derived state: seq %d/%d (%.0f events/s)", done, total, float64(done)/time.Since(rebuildStart).Seconds())
	}
	cfg.Treasury = c.treasury
	fed := federation.DefaultOptions()
	fed.Peers, fed.PeerKeys, fed.MirrorInterval = c.peers, c.peerKeys, c.mirrorEvery
	fed.PeerRate, fed.SyncRate = c.peerRate, c.syncRate
	mods, err := modules(fed)
	if err != nil {
		ln.Close()
		st.Close()
		return err
	}
	cfg.Modules, c.fed = mods.all, mods.federation
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
		return err
	}
	c.srv = srv
	c.log.Info("derived state rebuilt", "seconds", time.Since(rebuildStart).Round(time.Millisecond).Seconds())
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
	err := c.srv.Serve(ctx, c.ln)
	c.log.Info("relay stopped")
	return err
}

// Close releases the log.
func (c *serveCmd) Close() error {
	if c.store == nil {
		return nil
	}
	return c.store.Close()
}
