package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/netguard"
)

// Bounds of one resolution (seed §12.9.2, SPEC §18.8).
const (
	ResolveRelays    = 3                // relays asked at most
	ResolveTimeout   = 5 * time.Second  // per relay
	ResolveBodyLimit = 256 << 10        // bytes read from one answer
	resolveTotal     = 12 * time.Second // the whole resolution
)

// ErrNotResolved says no allowed relay gave a valid profile.
var ErrNotResolved = errors.New("no allowed relay holds a valid profile of this agent")

// ResolveAgent fetches agent's latest kind 0 from its home relays (seed
// §12.9.2 authoritative resolution), or, when homeRelays is empty, from
// the configured peers (the bootstrap relays); before them, a topic relay
// announcing one of the agent's capabilities (topicRelays). Only allowed relays are
// asked (AllowedRelay); at most ResolveRelays, each within ResolveTimeout,
// each answer read up to ResolveBodyLimit. Every profile fetched is hostile
// input: it is checked with the mirrored-event rules and stored through
// the tolerant mirrored path (so it is folded and cached as a real event);
// the newest valid one by (created_at, id) is returned. When that profile
// names home relays not asked yet, they are asked too (within the bound).
func (s *Module) ResolveAgent(ctx context.Context, agent string, homeRelays []string) (*protocol.Event, error) {
	if !protocol.IsHex64(agent) {
		return nil, fmt.Errorf("agent_id must be 64 lowercase hex")
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTotal)
	defer cancel()
	queue := homeRelays
	if len(queue) == 0 {
		queue = s.opts.Peers
	}
	// Topic relays first (seed §12.9.2: query, topic relay, then the
	// authoritative home relay), within the same bound.
	queue = append(s.topicRelays(ctx, agent), queue...)
	var best *protocol.Event
	var asked []string
	var lastErr error = ErrNotResolved
	for len(queue) > 0 && len(asked) < ResolveRelays {
		raw := queue[0]
		queue = queue[1:]
		base, guarded, ok := s.AllowedRelay(raw)
		if !ok || slices.Contains(asked, base) || !s.capped.until(base).IsZero() {
			continue // a relay that broke a cap is left alone a while
		}
		asked = append(asked, base)
		e, err := s.fetchProfile(ctx, base, guarded, agent)
		if isCapError(err) {
			s.capped.add(base, time.Now().Add(capBackoff))
		}
		if err != nil {
			lastErr = err
			s.cfg.Logger.Info("resolution failed", "relay", base, "agent", agent, "err", err)
			continue
		}
		if best == nil || e.CreatedAt > best.CreatedAt || e.CreatedAt == best.CreatedAt && e.ID > best.ID {
			best = e
			queue = append(queue, HomeRelays(e)...)
		}
	}
	if best == nil {
		return nil, lastErr
	}
	return best, nil
}

// HomeRelays reads a profile's home_relays (seed §12.9.2): its string
// entries, at most 8.
func HomeRelays(e *protocol.Event) []string {
	var body struct {
		HomeRelays []any `json:"home_relays"`
	}
	if e == nil || json.Unmarshal([]byte(e.Content), &body) != nil {
		return nil
	}
	var out []string
	for _, r := range body.HomeRelays {
		if s, ok := r.(string); ok && s != "" && len(out) < 8 {
			out = append(out, s)
		}
	}
	return out
}

// AllowedRelay normalises a relay address (ws:// → http://, wss:// →
// https://, no trailing slash, no query or fragment) and reports whether
// resolution may contact it, following the peers rules: a configured peer
// (the operator chose it: any address), or the URL of a relay's latest
// non-revoked kind 10 announcement in the log — then only over a dialer
// that refuses loopback, private, link-local and unspecified addresses
// (guarded), since anyone can publish an announcement. Anything else is
// refused: a profile's home_relays alone never makes the relay connect.
func (s *Module) AllowedRelay(raw string) (base string, guarded, ok bool) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" || u.User != nil {
		return "", false, false
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	case "http", "https":
	default:
		return "", false, false
	}
	u.RawQuery, u.Fragment = "", ""
	base = strings.TrimRight(u.String(), "/")
	if s.revoked(base) {
		return "", false, false
	}
	if slices.Contains(s.opts.Peers, base) {
		return base, false, true
	}
	if s.announced(base) {
		return base, true, true
	}
	return "", false, false
}

// announced reports whether base is the URL of a relay's latest
// non-revoked kind 10 announcement, as GET /relays lists them.
func (s *Module) announced(base string) bool {
	relays, err := s.knownRelays(context.Background())
	if err != nil {
		return false
	}
	for _, r := range relays {
		if strings.TrimRight(r.URL, "/") == base {
			return true
		}
	}
	return false
}

// fetchProfile asks base for agent's latest kind 0 and stores the valid
// ones through the mirrored path; it returns the newest valid one.
func (s *Module) fetchProfile(ctx context.Context, base string, guarded bool, agent string) (*protocol.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	u := base + "/events?kinds=0&limit=1&authors=" + agent
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	plainToLoopback(req)
	if s.cfg.RelayKey != nil {
		req.Header.Set("Authorization", protocol.HTTPAuth(s.cfg.RelayKey, http.MethodGet, u, nil, s.now()))
	}
	client := s.peerClient
	if guarded {
		client = guardedClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := readCapped(resp.Body, ResolveBodyLimit, base+"'s answer")
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %d", base, resp.StatusCode)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		return nil, fmt.Errorf("%s answered no event list: %v", base, err)
	}
	var evs []*protocol.Event
	for _, r := range raws {
		e, err := protocol.DecodeJSON(r)
		if err == nil && e.AgentID == agent && e.Kind == protocol.KindProfile {
			evs = append(evs, e)
		}
	}
	if len(evs) == 0 {
		return nil, ErrNotResolved
	}
	recs, _ := s.core.VerifyMirrored(evs) // id, signature, PoW: the rules for mirrored events
	if len(recs) == 0 {
		return nil, fmt.Errorf("%s gave no valid profile", base)
	}
	if _, err := s.core.Log().AppendBatch(ctx, recs); err != nil {
		return nil, err
	}
	var best *protocol.Event
	for _, r := range recs {
		if e := r.Event; best == nil || e.CreatedAt > best.CreatedAt || e.CreatedAt == best.CreatedAt && e.ID > best.ID {
			best = e
		}
	}
	return best, nil
}

// guardedClient connects only to public addresses: the check runs on the
// address actually dialled, after DNS, so a name cannot point it inside.
var guardedClient = &http.Client{
	Timeout:       ResolveTimeout,
	Transport:     &http.Transport{DialContext: (&net.Dialer{Timeout: ResolveTimeout, Control: netguard.Control("relay")}).DialContext},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// ResolveProfile is ResolveAgent from the home relays known names (its
// profile here, or nil for an unknown agent: then the configured peers);
// the directory's resolver (GET /agents/{agent_id}?resolve=true).
func (s *Module) ResolveProfile(ctx context.Context, agent string, known *protocol.Event) (*protocol.Event, error) {
	return s.ResolveAgent(ctx, agent, HomeRelays(known))
}
