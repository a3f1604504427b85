package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/anp2net/relay/protocol"
)

// A profile (kind 0) may declare a human_anchor (seed §4.1.1): a human or
// organisation on another platform vouching for the agent. The relay
// stores it verbatim and never checks it; a consumer MUST verify it
// before treating it as evidence, and treat an anchor that fails as if it
// were absent. VerifyHumanAnchor performs the seed's three checks:
//
//  1. fetch verification_url over HTTPS;
//  2. the URL's host matches the declared platform (PlatformHosts);
//  3. the page's body contains the claiming agent_id in hex.
//
// It does not read a QR code an image may carry (the seed's alternative
// to hex), run a page's scripts, or judge whether the handle is the one
// the page belongs to: a page that shows the id in its served HTML
// verifies, whoever posted it there.

// HumanAnchor is the human_anchor block of a profile's content.
type HumanAnchor struct {
	Platform        string `json:"platform"`
	Handle          string `json:"handle"`
	VerificationURL string `json:"verification_url"`
	// VerifiedAt is the time the agent says it was verified (informational,
	// 0 when absent).
	VerifiedAt int64 `json:"verified_at,omitempty"`
}

// AnchorStatus is the outcome of verifying a human_anchor.
type AnchorStatus string

// The outcomes: no anchor, one that passed the seed's checks, one that
// failed (to be treated as absent).
const (
	AnchorAbsent      AnchorStatus = "absent"
	AnchorVerified    AnchorStatus = "verified"
	AnchorNotVerified AnchorStatus = "not_verified"
)

// Stable codes of an anchor that is not verified (AnchorResult.Code).
const (
	AnchorMalformed    = "anchor_malformed"     // not an object of strings, or platform or URL missing
	AnchorNotHTTPS     = "anchor_not_https"     // verification_url is not an https URL
	AnchorHostMismatch = "anchor_host_mismatch" // its host is not one of the platform's
	AnchorFetchFailed  = "anchor_fetch_failed"  // no 200 answer over HTTPS (or a refused redirect)
	AnchorIDNotFound   = "anchor_id_not_found"  // the page does not contain the agent_id
	AnchorBadProfile   = "anchor_bad_profile"   // not a kind 0 whose id and signature verify
)

// AnchorResult is what VerifyHumanAnchor found.
type AnchorResult struct {
	AgentID string       `json:"agent_id"`
	Status  AnchorStatus `json:"status"`
	// Anchor is the declared block ("" fields when malformed or absent).
	Anchor *HumanAnchor `json:"anchor,omitempty"`
	// Code and Reason say why it is not verified.
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// MaxAnchorPage bounds the bytes of the verification page read: the id
// must appear in its first 2 MiB.
const MaxAnchorPage = 2 << 20

// AnchorTimeout bounds one verification (redirects included) when the
// caller's context has no earlier deadline.
const AnchorTimeout = 10 * time.Second

// maxAnchorRedirects bounds the redirects followed (each stays on HTTPS
// and on the platform's hosts).
const maxAnchorRedirects = 5

// platformAliases lists the hosts of platforms known under several
// names (seed §4.1.1: "x.com" ⇒ host ∈ {x.com, twitter.com} only).
var platformAliases = map[string][]string{
	"x.com":       {"x.com", "twitter.com"},
	"twitter.com": {"x.com", "twitter.com"},
}

// PlatformHosts returns the hosts a verification_url may have for
// platform: the aliases the seed names for x.com, else the platform
// itself as a lowercase host name. It returns nil for a platform that is
// not a host name.
func PlatformHosts(platform string) []string {
	p := strings.TrimSuffix(strings.ToLower(platform), ".")
	if hs, ok := platformAliases[p]; ok {
		return hs
	}
	if p == "" || strings.ContainsAny(p, "/:@ \t\r\n?#[]\\") {
		return nil
	}
	return []string{p}
}

// ParseHumanAnchor returns the human_anchor of a profile's content, nil
// with no error when there is none (or it is null). It reports an error when the content
// is not a JSON object, or the anchor is not an object whose platform,
// handle and verification_url are strings (platform and URL non-empty)
// and verified_at, when present, an integer.
func ParseHumanAnchor(content string) (*HumanAnchor, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal([]byte(content), &p); err != nil {
		return nil, fmt.Errorf("profile content is not a JSON object: %w", err)
	}
	raw, ok := p["human_anchor"]
	if !ok || string(raw) == "null" {
		return nil, nil // null declares no anchor, as an absent field does
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, errors.New("human_anchor is not an object")
	}
	a := &HumanAnchor{}
	for name, dst := range map[string]*string{"platform": &a.Platform, "handle": &a.Handle, "verification_url": &a.VerificationURL} {
		if v, ok := fields[name]; ok && json.Unmarshal(v, dst) != nil {
			return nil, fmt.Errorf("human_anchor.%s is not a string", name)
		}
	}
	if v, ok := fields["verified_at"]; ok && json.Unmarshal(v, &a.VerifiedAt) != nil {
		return nil, errors.New("human_anchor.verified_at is not an integer")
	}
	if a.Platform == "" || a.VerificationURL == "" {
		return a, errors.New("human_anchor lacks platform or verification_url")
	}
	return a, nil
}

// CheckAnchorURL makes the checks that need no network: the
// verification_url is an absolute https URL without credentials, and its
// host is one of PlatformHosts(platform). It returns the parsed URL, or
// the AnchorResult code and an error.
func CheckAnchorURL(a *HumanAnchor) (*url.URL, string, error) {
	u, err := url.Parse(a.VerificationURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return nil, AnchorNotHTTPS, fmt.Errorf("verification_url %q is not an https URL", a.VerificationURL)
	}
	if !hostOf(a.Platform, u) {
		return nil, AnchorHostMismatch, fmt.Errorf("verification_url host %q is not one of platform %q's %v", u.Hostname(), a.Platform, PlatformHosts(a.Platform))
	}
	return u, "", nil
}

// hostOf reports whether u's host is one of platform's.
func hostOf(platform string, u *url.URL) bool {
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	for _, h := range PlatformHosts(platform) {
		if host == h {
			return true
		}
	}
	return false
}

// VerifyHumanAnchor verifies the human_anchor of profile, a kind 0 event,
// by the seed's three checks (see the comment at the top of this file),
// fetching its verification_url with hc (nil: AnchorHTTPClient()). Each
// redirect must stay on HTTPS and on the platform's hosts; the page must
// answer 200 within AnchorTimeout, and only its first MaxAnchorPage bytes
// are read. The profile's id and signature are checked first: an anchor
// is evidence only for the agent that signed it. A failure is a result
// (AnchorNotVerified with a Code), never an error.
func VerifyHumanAnchor(ctx context.Context, hc *http.Client, profile *protocol.Event) AnchorResult {
	res := AnchorResult{AgentID: profile.AgentID, Status: AnchorNotVerified}
	if profile.Kind != protocol.KindProfile || profile.CheckID() != nil || profile.CheckSig() != nil {
		res.Code, res.Reason = AnchorBadProfile, "not a kind 0 profile whose id and signature verify"
		return res
	}
	a, err := ParseHumanAnchor(profile.Content)
	if err == nil && a == nil {
		res.Status = AnchorAbsent
		return res
	}
	res.Anchor = a
	if err != nil {
		res.Code, res.Reason = AnchorMalformed, err.Error()
		return res
	}
	u, code, err := CheckAnchorURL(a)
	if err != nil {
		res.Code, res.Reason = code, err.Error()
		return res
	}
	body, err := fetchAnchor(ctx, hc, a.Platform, u)
	if err != nil {
		res.Code, res.Reason = AnchorFetchFailed, err.Error()
		return res
	}
	if !bytes.Contains(bytes.ToLower(body), []byte(profile.AgentID)) {
		res.Code, res.Reason = AnchorIDNotFound, fmt.Sprintf("the page at %s does not contain the agent_id", u.Redacted())
		return res
	}
	res.Status = AnchorVerified
	return res
}

// fetchAnchor GETs u with hc, following redirects only to the platform's
// hosts over HTTPS, and returns the first MaxAnchorPage bytes of a 200.
func fetchAnchor(ctx context.Context, hc *http.Client, platform string, u *url.URL) ([]byte, error) {
	if hc == nil {
		hc = AnchorHTTPClient()
	}
	c := *hc
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > maxAnchorRedirects {
			return fmt.Errorf("more than %d redirects", maxAnchorRedirects)
		}
		if req.URL.Scheme != "https" || !hostOf(platform, req.URL) {
			return fmt.Errorf("redirect to %s leaves the platform's hosts or HTTPS", req.URL.Redacted())
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, AnchorTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/html, text/plain;q=0.9, */*;q=0.5")
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch verification_url: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch verification_url: HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnchorPage))
	if err != nil {
		return nil, fmt.Errorf("read verification page: %w", err)
	}
	return body, nil
}

// AnchorHTTPClient returns the client VerifyHumanAnchor uses by default:
// it connects only to public unicast addresses (never loopback, private,
// link-local, shared or unspecified ones), so a profile cannot point a
// verifier running on a server at that server's own network, and every
// connection and answer has a deadline.
func AnchorHTTPClient() *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, Control: publicOnly}
	tr := &http.Transport{
		DialContext:            d.DialContext,
		TLSHandshakeTimeout:    5 * time.Second,
		ResponseHeaderTimeout:  5 * time.Second,
		MaxIdleConns:           16,
		IdleConnTimeout:        30 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &http.Client{Transport: tr, Timeout: AnchorTimeout}
}

// publicOnly refuses a connection to an address that is not public
// unicast (it runs after name resolution, on the address dialled).
func publicOnly(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("anchor: dial %s: %w", address, err)
	}
	ip := ap.Addr().Unmap()
	shared := netip.MustParsePrefix("100.64.0.0/10") // carrier-grade NAT (RFC 6598)
	if !ip.IsGlobalUnicast() || ip.IsPrivate() || shared.Contains(ip) {
		return fmt.Errorf("anchor: refusing to connect to non-public address %s", ip)
	}
	return nil
}
