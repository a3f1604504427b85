package directory

import (
	"encoding/json"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/trust"
	"github.com/labstack/echo/v4"
)

// capEntry is one capability an agent declares in its latest kind 4: the
// name and the metadata object the content gives for it (empty when the
// name comes from a cap tag alone).
type capEntry struct {
	Name string
	Meta map[string]any
}

// capEntries returns the capabilities of a kind 4, content entries first
// (with their metadata), then cap tags the content does not describe.
func capEntries(e *protocol.Event) []capEntry {
	if e == nil {
		return nil
	}
	var body struct {
		Capabilities []map[string]any `json:"capabilities"`
	}
	json.Unmarshal([]byte(e.Content), &body)
	var out []capEntry
	seen := map[string]bool{}
	for _, m := range body.Capabilities {
		if n, _ := m["name"].(string); n != "" && !seen[n] {
			seen[n] = true
			out = append(out, capEntry{n, m})
		}
	}
	for _, n := range e.TagValues("cap") {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, capEntry{n, map[string]any{}})
		}
	}
	return out
}

// canonicalName is the §4.5 shape of a capability name: DNS-style dotted
// labels (domain.subdomain.action), lowercase letters, digits and dashes,
// at least two labels.
var canonicalName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*(\.[a-z0-9][a-z0-9-]*)+$`)

// priceUSD reads a capability's declared price in USD: "free" is 0, a
// number or decimal string is USD, an object {amount, currency} counts
// when currency is USD. ok is false for anything else.
func priceUSD(meta map[string]any) (float64, bool) {
	switch p := meta["price"].(type) {
	case nil:
		if v, ok := meta["price_usd"]; ok {
			return priceUSD(map[string]any{"price": v})
		}
	case string:
		if strings.EqualFold(strings.TrimSpace(p), "free") {
			return 0, true
		}
		if f, err := strconv.ParseFloat(strings.TrimPrefix(strings.TrimSpace(p), "$"), 64); err == nil && f >= 0 && !math.IsInf(f, 0) {
			return f, true
		}
	case float64:
		if p >= 0 {
			return p, true
		}
	case map[string]any:
		if cur, _ := p["currency"].(string); strings.EqualFold(cur, "USD") {
			return priceUSD(map[string]any{"price": p["amount"]})
		}
	}
	return 0, false
}

// latencyMS reads a capability's declared latency (latency_ms, or
// p50_latency_ms), in milliseconds.
func latencyMS(meta map[string]any) (float64, bool) {
	for _, k := range []string{"latency_ms", "p50_latency_ms"} {
		if f, ok := meta[k].(float64); ok && f >= 0 {
			return f, true
		}
	}
	return 0, false
}

// stringsOf returns the strings of meta[key] (a string or a list).
func stringsOf(meta map[string]any, keys ...string) []string {
	var out []string
	for _, k := range keys {
		switch v := meta[k].(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, x := range v {
				if s, ok := x.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// searchResult is one provider of a matching capability.
type searchResult struct {
	Provider    string         `json:"provider"`
	Name        string         `json:"name,omitempty"`
	Capability  string         `json:"capability"`
	Metadata    map[string]any `json:"metadata"`
	Trust       float64        `json:"trust"`
	Rank        int            `json:"rank,omitempty"`
	PriceUSD    *float64       `json:"price_usd"`
	LatencyMS   *float64       `json:"latency_ms"`
	DeclaredAt  int64          `json:"declared_at"`
	EventID     string         `json:"event_id"`
	IsCanonical bool           `json:"is_canonical"`
}

// searchQuery is GET /capabilities/search's parsed parameters.
type searchQuery struct {
	Prefix          string   `json:"cap,omitempty"`
	MinTrust        *float64 `json:"min_trust,omitempty"`
	MaxPriceUSD     *float64 `json:"max_price_usd,omitempty"`
	MaxLatencyMS    *float64 `json:"max_latency_ms,omitempty"`
	Language        string   `json:"supported_language,omitempty"`
	Tag             string   `json:"tag,omitempty"`
	SortBy          string   `json:"sort_by"`
	Limit           int      `json:"limit"`
	IncludeNonCanon bool     `json:"-"`
}

func floatParam(c echo.Context, name string) (*float64, error) {
	s := c.QueryParam(name)
	if s == "" {
		return nil, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, protocol.Errorf(httpx.CodeBadParameter, "%s must be a number", name)
	}
	return &f, nil
}

func parseSearch(c echo.Context) (searchQuery, error) {
	v, err := httpx.Params(c, "cap", "q", "min_trust", "max_price_usd", "max_latency_ms", "supported_language", "tag", "sort_by", "limit")
	if err != nil {
		return searchQuery{}, err
	}
	q := searchQuery{Prefix: v.Get("cap"), Language: v.Get("supported_language"), Tag: v.Get("tag"), SortBy: v.Get("sort_by")}
	if q.Prefix == "" {
		q.Prefix = v.Get("q")
	}
	if q.SortBy == "" {
		q.SortBy = "trust"
	}
	if q.SortBy != "trust" && q.SortBy != "latency" && q.SortBy != "price" {
		return q, protocol.Errorf(httpx.CodeBadParameter, "sort_by must be trust, latency or price")
	}
	for _, p := range []struct {
		name string
		dst  **float64
	}{{"min_trust", &q.MinTrust}, {"max_price_usd", &q.MaxPriceUSD}, {"max_latency_ms", &q.MaxLatencyMS}} {
		if *p.dst, err = floatParam(c, p.name); err != nil {
			return q, err
		}
	}
	limit, err := httpx.IntParam(v, "limit", 50, 1, 500)
	q.Limit = int(limit)
	return q, err
}

// searchCapabilities is GET /capabilities/search: every provider whose
// latest kind 4 declares a capability whose name starts with cap (or q),
// filtered by trust, declared price, declared latency, language and tag,
// sorted by trust (default), latency or price.
func (m *Module) searchCapabilities(c echo.Context) error {
	q, err := parseSearch(c)
	if err != nil {
		return err
	}
	snap := m.core.Views().Trust.Current(m.core.Now())
	var out []searchResult
	for _, a := range m.dir.Agents("") {
		for _, ce := range capEntries(a.Capabilities) {
			if r, ok := q.match(a, ce, snap.Summary); ok {
				out = append(out, r)
			}
		}
	}
	q.sort(out)
	total := len(out)
	out = out[:min(len(out), q.Limit)]
	// An empty answer ("no publisher for this capability right now") is a
	// negative answer: seed §12.9.4 keeps it short-lived.
	ttl := ProfileTTL
	if len(out) == 0 {
		ttl = NegativeTTL
	}
	for _, r := range out {
		if a, ok := m.dir.Agent(r.Provider); ok {
			ttl = capabilityTTL(ttl, a.Capabilities)
		}
	}
	return httpx.Cached(c, ttl, map[string]any{"query": q, "results": httpx.NonNil(out), "count": len(out), "total": total})
}

// match builds a's result for ce, or false when a filter excludes it.
func (q searchQuery) match(a Agent, ce capEntry, summary func(string) (trust.Summary, bool)) (searchResult, bool) {
	if !strings.HasPrefix(ce.Name, q.Prefix) {
		return searchResult{}, false
	}
	r := searchResult{Provider: a.AgentID, Name: a.Name, Capability: ce.Name, Metadata: ce.Meta,
		DeclaredAt: a.Capabilities.CreatedAt, EventID: a.Capabilities.ID, IsCanonical: canonicalName.MatchString(ce.Name)}
	if s, ok := summary(a.AgentID); ok {
		r.Trust, r.Rank = s.WeightedScore, s.Rank
	}
	if p, ok := priceUSD(ce.Meta); ok {
		r.PriceUSD = &p
	}
	if l, ok := latencyMS(ce.Meta); ok {
		r.LatencyMS = &l
	}
	switch {
	case q.MinTrust != nil && r.Trust < *q.MinTrust,
		q.MaxPriceUSD != nil && (r.PriceUSD == nil || *r.PriceUSD > *q.MaxPriceUSD),
		q.MaxLatencyMS != nil && (r.LatencyMS == nil || *r.LatencyMS > *q.MaxLatencyMS),
		q.Language != "" && !containsFold(stringsOf(ce.Meta, "languages", "supported_languages", "language"), q.Language),
		q.Tag != "" && !containsFold(stringsOf(ce.Meta, "tags"), q.Tag) && !containsFold(a.Capabilities.TagValues("t"), q.Tag):
		return r, false
	}
	return r, true
}

// sort orders results by the chosen key (unknown prices and latencies
// last), then by trust, then provider and capability.
func (q searchQuery) sort(rs []searchResult) {
	key := func(r searchResult) (float64, bool) {
		switch q.SortBy {
		case "price":
			if r.PriceUSD == nil {
				return 0, false
			}
			return *r.PriceUSD, true
		case "latency":
			if r.LatencyMS == nil {
				return 0, false
			}
			return *r.LatencyMS, true
		}
		return -r.Trust, true
	}
	sort.SliceStable(rs, func(i, j int) bool {
		ki, oki := key(rs[i])
		kj, okj := key(rs[j])
		switch {
		case oki != okj:
			return oki
		case ki != kj:
			return ki < kj
		case rs[i].Trust != rs[j].Trust:
			return rs[i].Trust > rs[j].Trust
		case rs[i].Provider != rs[j].Provider:
			return rs[i].Provider < rs[j].Provider
		}
		return rs[i].Capability < rs[j].Capability
	})
}
