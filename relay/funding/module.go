package funding

import (
	"net/http"
	"regexp"
	"strconv"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/relay/state"
	"github.com/labstack/echo/v4"
)

// Options configure the module.
type Options struct {
	// Report configures this relay's own capacity reports (off when its
	// Every is zero).
	Report ReportOptions
}

// Module is funding as a relay capability: the Fold (part of /state) and
// its routes GET /funding/{agent_id} and GET /capacity; with
// Options.Report it also runs this relay's operator agent (§13.7.1).
type Module struct {
	fold *Fold
	opts Options
	core *relay.Server
	rate *rateMeter
	// started is the relay's clock at Mount: the first report covers the
	// time since, when the log holds none of the relay's.
	started int64
}

var (
	_ relay.Folder = (*Module)(nil)
	_ relay.Runner = (*Module)(nil)
)

// NewModule returns the funding module with opts.
func NewModule(opts Options) *Module {
	return &Module{fold: NewFold(), opts: opts, rate: newRateMeter()}
}

// SetReport configures this relay's operator reports; call it before the
// relay starts serving.
func (m *Module) SetReport(o ReportOptions) { m.opts.Report = o }

// Name is "funding".
func (m *Module) Name() string { return "funding" }

// Fold is the funding fold.
func (m *Module) Fold() state.Fold { return m.fold }

// Funding returns the fold, for tests and other modules.
func (m *Module) Funding() *Fold { return m.fold }

// Mount registers the routes and the commit hook that measures the
// publish rate for the operator's report.
func (m *Module) Mount(core *relay.Server) error {
	m.core = core
	m.rate.now = core.Now
	m.started = core.Now()
	core.Route(http.MethodGet, "/funding/:agent_id", m.getFunding)
	core.Route(http.MethodGet, "/capacity", m.getCapacity)
	core.OnCommit(m.rate.observe)
	return nil
}

var windowRE = regexp.MustCompile(`^([0-9]{1,6})([dhs]?)$`)

// maxWindow is the longest window /funding accepts: ten years.
const maxWindow = 3650 * 86400

// parseWindow reads window=<N>d|<N>h|<N>s|<N> (seconds), 1 s to 3650 days;
// default 30d.
func parseWindow(s string) (int64, error) {
	if s == "" {
		return 30 * 86400, nil
	}
	mm := windowRE.FindStringSubmatch(s)
	if mm == nil {
		return 0, protocol.Errorf(httpx.CodeBadParameter, "window must be <N>d, <N>h or <N>s, such as 30d")
	}
	n, _ := strconv.ParseInt(mm[1], 10, 64)
	switch mm[2] {
	case "d":
		n *= 86400
	case "h":
		n *= 3600
	}
	if n < 1 || n > maxWindow {
		return 0, protocol.Errorf(httpx.CodeBadParameter, "window must be between 1s and 3650d")
	}
	return n, nil
}

// externalView is a re-attestation with its verifier's trust, to weigh it
// by (§13.3.3).
type externalView struct {
	External
	VerifierTrust float64 `json:"verifier_trust"`
	VerifierRank  int     `json:"verifier_rank"`
}

type donationView struct {
	Donation
	External []externalView `json:"external_attestations"`
}

// getFunding is GET /funding/{agent_id}?window=30d (§13.3.3, §13.4).
func (m *Module) getFunding(c echo.Context) error {
	v, err := httpx.Params(c, "window")
	if err != nil {
		return err
	}
	id, err := httpx.HexParam(c, "agent_id")
	if err != nil {
		return err
	}
	window, err := parseWindow(v.Get("window"))
	if err != nil {
		return err
	}
	now := m.core.Now()
	s := m.fold.Summary(id, now-window, now)
	snap := m.core.Views().Trust.Current(now)
	donations := make([]donationView, 0, len(s.Donations))
	for _, d := range s.Donations {
		dv := donationView{Donation: d, External: make([]externalView, 0, len(d.External))}
		for _, x := range d.External {
			dv.External = append(dv.External, externalView{x, snap.WeightedScore(x.Verifier), snap.Rank(x.Verifier)})
		}
		donations = append(donations, dv)
	}
	win := v.Get("window")
	if win == "" {
		win = "30d"
	}
	out := map[string]any{
		"agent_id": id, "window": win, "window_seconds": window, "since": now - window, "until": now,
		"addresses": []protocol.FundingAddress{}, "funding_event_id": nil, "transparency_url": "",
		"disclose_totals": false, "invalid_declarations": s.InvalidDeclarations,
		"received_count": s.Received, "received_unique_donors": s.UniqueDonors,
		"received_unverified_count": s.Unverified, "received_verified_count": 0,
		"received_unverifiable_count": s.Unverifiable, "acknowledged_count": s.Acknowledged,
		"received_unvalidated_chain_count": s.UnvalidatedChain,
		"externally_verified_count":        s.ExternallyVerified, "donations": donations, "ignored": s.Ignored,
		"verification_note": VerificationNote, "affects_trust": false,
	}
	if d := s.Declaration; d != nil {
		out["addresses"], out["funding_event_id"], out["transparency_url"] = d.Addresses, d.EventID, d.TransparencyURL
		out["disclose_totals"], out["purpose"], out["suggested_minimum"] = d.DiscloseTotals, d.Purpose, d.SuggestedMinimum
		if d.DiscloseTotals {
			out["total_usd_equivalent"], out["totals_by_asset"] = s.TotalUSD, s.TotalsByAsset
		}
	}
	return c.JSON(http.StatusOK, out)
}

// getCapacity is GET /capacity: the latest capacity report of every relay
// operator known through kind 10 (§13.7.2), with whether it has the
// report's shape.
func (m *Module) getCapacity(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	now := m.core.Now()
	reports := m.fold.Capacity(now)
	return c.JSON(http.StatusOK, map[string]any{"operators": len(m.fold.Operators()), "reports": reports, "count": len(reports)})
}
