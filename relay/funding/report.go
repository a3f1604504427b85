package funding

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// ReportOptions configure this relay's operator agent (§13.7.1): every
// Every, it publishes a kind 22 capacity report signed by the relay key.
type ReportOptions struct {
	// Every is the report period (0: no reports).
	Every time.Duration
	// Tick is how often the relay's clock is checked against the period
	// (default a tenth of the period, between 100 ms and one minute).
	Tick time.Duration
	// InfraCostsUSD is the operator's declared infrastructure cost per
	// period, a non-negative decimal ("0.00" by default); the relay cannot
	// measure it.
	InfraCostsUSD string
	// Funding is the content of the operator's kind 16 (§13.7.1), or "":
	// published, signed by the relay key, when it differs from the
	// latest one the log holds.
	Funding string
}

// FundingEvent returns the unsigned kind 16 for content at created_at,
// with one chain tag per chain its addresses name, or the violations.
func FundingEvent(content string, at int64) (*protocol.Event, error) {
	e := &protocol.Event{CreatedAt: at, Kind: protocol.KindFunding, Content: content, Tags: [][]string{}}
	seen := map[string]bool{}
	var probe struct {
		Addresses []struct {
			Chain string `json:"chain"`
		} `json:"addresses"`
	}
	json.Unmarshal([]byte(content), &probe)
	for _, a := range probe.Addresses {
		if c, ok := protocol.NormalizeChain(a.Chain); ok && !seen[c] {
			seen[c] = true
			e.Tags = append(e.Tags, []string{"chain", c})
		}
	}
	if _, errs := protocol.ParseFunding(e); len(errs) > 0 {
		return nil, errs[0]
	}
	return e, nil
}

var decimalRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// Validate returns an error when InfraCostsUSD is neither empty nor a
// non-negative decimal, or Every is negative.
func (o ReportOptions) Validate() error {
	if o.InfraCostsUSD != "" && !decimalRE.MatchString(o.InfraCostsUSD) {
		return fmt.Errorf("infra costs %q: want a non-negative decimal such as 180.00", o.InfraCostsUSD)
	}
	if o.Every < 0 {
		return fmt.Errorf("report period %s is negative", o.Every)
	}
	if o.Funding != "" {
		if _, err := FundingEvent(o.Funding, 0); err != nil {
			return fmt.Errorf("operator funding address: %w", err)
		}
	}
	return nil
}

// rateMeter counts committed events per second of the relay's clock and
// the agents that published them, for the operator's report.
type rateMeter struct {
	mu     sync.Mutex
	now    func() int64
	counts map[int64]int64  // unix second → events committed
	agents map[string]int64 // agent → last commit second
}

func newRateMeter() *rateMeter {
	return &rateMeter{counts: map[int64]int64{}, agents: map[string]int64{}}
}

func (r *rateMeter) observe(batch []eventlog.Committed) {
	if r.now == nil {
		return
	}
	t := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[t] += int64(len(batch))
	for _, c := range batch {
		r.agents[c.Event.AgentID] = t
	}
}

// rates returns the peak and 99th-percentile events per second over the
// seconds in [from, to), quiet seconds included, and the agents active
// then; it forgets what is older.
func (r *rateMeter) rates(from, to int64) (peak, p99 int64, active int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var busy []int64
	for s, n := range r.counts {
		switch {
		case s < from:
			delete(r.counts, s)
		case s < to:
			busy = append(busy, n)
		}
	}
	for a, s := range r.agents {
		switch {
		case s < from:
			delete(r.agents, a)
		case s < to:
			active++
		}
	}
	sort.Slice(busy, func(i, j int) bool { return busy[i] > busy[j] })
	if len(busy) > 0 {
		peak = busy[0]
	}
	// The 99th percentile of to-from seconds: the k-th busiest second,
	// k = ceil(1% of the seconds); quiet seconds count zero.
	if k := int(math.Ceil(float64(to-from) / 100)); k >= 1 && k <= len(busy) {
		p99 = busy[k-1]
	}
	return peak, p99, active
}

// Run publishes the operator's capacity reports until ctx ends.
func (m *Module) Run(ctx context.Context) {
	o := m.opts.Report
	key := m.core.Config().RelayKey
	if key == nil {
		return
	}
	if o.Funding != "" {
		if err := m.declare(ctx, o.Funding); err != nil {
			slog.Warn("operator funding address", "err", err)
		}
	}
	if o.Every <= 0 {
		return
	}
	tick := o.Tick
	if tick <= 0 {
		tick = min(max(o.Every/10, 100*time.Millisecond), time.Minute)
	}
	self := protocol.AgentIDOf(key)
	last := m.lastReport(ctx, self)
	if last == 0 {
		last = m.started
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		now := m.core.Now()
		if now-last >= int64(o.Every/time.Second) {
			if err := m.publishReport(ctx, last, now); err != nil {
				slog.Warn("capacity report", "err", err)
			} else {
				last = now
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// declare publishes the operator's kind 16 unless the latest the log
// holds by the relay key has the same content.
func (m *Module) declare(ctx context.Context, content string) error {
	key := m.core.Config().RelayKey
	self := protocol.AgentIDOf(key)
	bodies, err := m.core.Log().Query(ctx, eventlog.Filter{Authors: []string{self}, Kinds: []int64{protocol.KindFunding}, Limit: 1})
	if err != nil {
		return err
	}
	if len(bodies) == 1 {
		var last protocol.Event
		if json.Unmarshal(bodies[0], &last) == nil && last.Content == content {
			return nil
		}
	}
	e, err := FundingEvent(content, m.core.Now())
	if err != nil {
		return err
	}
	e.Sign(key)
	if _, rejected, err := m.core.IngestMirrored(ctx, []*protocol.Event{e}); err != nil || rejected > 0 {
		return fmt.Errorf("funding address not stored (rejected %d): %v", rejected, err)
	}
	return nil
}

// lastReport is the created_at of the relay's latest stored kind 22, or 0.
func (m *Module) lastReport(ctx context.Context, self string) int64 {
	bodies, err := m.core.Log().Query(ctx, eventlog.Filter{Authors: []string{self}, Kinds: []int64{protocol.KindCapacity}, Limit: 1})
	if err != nil || len(bodies) == 0 {
		return 0
	}
	var e protocol.Event
	if json.Unmarshal(bodies[0], &e) != nil {
		return 0
	}
	return e.CreatedAt
}

// publishReport signs and stores the report for [from, to).
func (m *Module) publishReport(ctx context.Context, from, to int64) error {
	content, err := m.reportContent(ctx, from, to)
	if err != nil {
		return err
	}
	e := &protocol.Event{CreatedAt: to, Kind: protocol.KindCapacity, Content: string(content),
		Tags: [][]string{{"t", "infra"}, {"t", "transparency"}, {"s", "anp.capacity_report.v1"}}}
	e.Sign(m.core.Config().RelayKey)
	if _, rejected, err := m.core.IngestMirrored(ctx, []*protocol.Event{e}); err != nil || rejected > 0 {
		return fmt.Errorf("capacity report not stored (rejected %d): %v", rejected, err)
	}
	return nil
}

// reportContent builds §13.7.2's content from figures the relay measured:
// its publish rate, active agents and storage over the period, and the
// donations attested to its own agent at its kind 16 address.
func (m *Module) reportContent(ctx context.Context, from, to int64) ([]byte, error) {
	st, err := m.core.Log().Stats(ctx)
	if err != nil {
		return nil, err
	}
	self := protocol.AgentIDOf(m.core.Config().RelayKey)
	peak, p99, active := m.rate.rates(from, to)
	s := m.fold.Summary(self, from-1, to-1) // donations dated in [from, to)
	costs := m.opts.Report.InfraCostsUSD
	if costs == "" {
		costs = "0.00"
	}
	utc := func(t int64) string { return time.Unix(t, 0).UTC().Format(time.RFC3339) }
	return json.Marshal(map[string]any{
		"period":                 utc(from) + ".." + utc(to),
		"donations_received_usd": s.TotalUSD,
		"infra_costs_usd":        costs,
		"upgrades":               []any{},
		"backlog":                []any{},
		"capacity": map[string]any{
			"peak_events_per_sec":   peak,
			"p99_events_per_sec":    p99,
			"current_active_agents": active,
			"storage_gb":            json.Number(strconv.FormatFloat(float64(st.Bytes)/1e9, 'f', 6, 64)),
			"total_events":          st.Events,
		},
		"donations": map[string]any{
			"received_count": s.Received, "received_unique_donors": s.UniqueDonors,
			"received_unverified_count": s.Unverified, "received_unverifiable_count": s.Unverifiable,
			"totals_by_asset": s.TotalsByAsset,
		},
		"source": "anp2 relay operator agent",
	})
}
