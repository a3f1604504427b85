package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/anp2net/relay/protocol"
)

// Client talks to one relay.
type Client struct {
	// Base is the relay's base URL, e.g. http://127.0.0.1:8080 (or .../api).
	Base string
	// HTTP sends the requests (http.DefaultClient from New).
	HTTP *http.Client
	// Key, when set, authenticates every request as its agent (D4
	// Authorization header); Now gives the clock for it (default time.Now).
	Key ed25519.PrivateKey
	// Now is the clock events and headers are signed at (nil: time.Now).
	Now func() time.Time
	// TriggerPoW is the proof of work, in leading zero bits, CreateTrigger
	// mines on its Authorization event (SPEC §16 "Registration cost"):
	// 0 means DefaultTriggerPoW, a negative value none. A relay that asks
	// for more says so, and CreateTrigger mines again once at its figure.
	TriggerPoW int
}

// MaxResponse bounds the answer a client reads into memory (1000
// events of the largest size fit; GET /export is streamed instead).
const MaxResponse = 256 << 20

// New returns a client for base using http.DefaultClient.
func New(base string) *Client {
	return &Client{Base: strings.TrimRight(base, "/"), HTTP: http.DefaultClient}
}

// Error is a non-2xx answer from the relay.
type Error struct {
	Status int    // HTTP status
	Code   string // the stable code of {"detail", "code"}, "" when absent
	Detail any    // the detail: text, or a 422's list of field errors
	Body   []byte // the whole answer
}

// Error says the status, and the relay's code and detail when it gave them.
func (e *Error) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("relay answered %d %s: %v", e.Status, e.Code, e.Detail)
	}
	return fmt.Sprintf("relay answered %d: %s", e.Status, bytes.TrimSpace(e.Body))
}

// PublishResult is the relay's answer to a publish.
type PublishResult struct {
	ID        string `json:"id"`
	Accepted  bool   `json:"accepted"`
	Duplicate bool   `json:"duplicate"`
	Stored    bool   `json:"stored"`
	// Warnings name each departure from the seed the relay accepted (D17).
	Warnings []Warning `json:"warnings,omitempty"`
}

// Publish posts e as JSON, or as deterministic CBOR when cbor is true. A
// non-200 answer is an *Error.
func (c *Client) Publish(ctx context.Context, e *protocol.Event, cbor bool) (*PublishResult, error) {
	body, ct := protocol.AppendJSON(nil, e), "application/json"
	if cbor {
		var err error
		if body, err = protocol.EncodeCBOR(e); err != nil {
			return nil, err
		}
		ct = protocol.ContentTypeCBOR
	}
	var res PublishResult
	if err := c.do(ctx, http.MethodPost, "/events", ct, body, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// BatchResult is the answer of POST /events/batch: counts, and one result
// per event in order (relay.BatchResult's fields).
type BatchResult struct {
	Accepted  int `json:"accepted"`
	Duplicate int `json:"duplicate"`
	Rejected  int `json:"rejected"`
	Results   []struct {
		Index     int    `json:"index"`
		ID        string `json:"id"`
		Status    int    `json:"status"`
		Accepted  bool   `json:"accepted"`
		Duplicate bool   `json:"duplicate"`
		Stored    bool   `json:"stored"`
		Code      string `json:"code"`
		Detail    any    `json:"detail"`
	} `json:"results"`
}

// PublishBatch posts evs (at most 1000) to POST /events/batch as a JSON
// array; each event is judged alone and the good ones are committed
// together before the answer.
func (c *Client) PublishBatch(ctx context.Context, evs []*protocol.Event) (*BatchResult, error) {
	body := []byte{'['}
	for i, e := range evs {
		if i > 0 {
			body = append(body, ',')
		}
		body = protocol.AppendJSON(body, e)
	}
	body = append(body, ']')
	var res BatchResult
	if err := c.do(ctx, http.MethodPost, "/events/batch", "application/json", body, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// PostRaw posts body with content type ct to path and decodes a 200 answer
// into out.
func (c *Client) PostRaw(ctx context.Context, path, ct string, body []byte, out any) error {
	return c.do(ctx, http.MethodPost, path, ct, body, out)
}

// GetJSON fetches path (with query) and decodes a 200 answer into out.
func (c *Client) GetJSON(ctx context.Context, path string, query url.Values, out any) error {
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	return c.do(ctx, http.MethodGet, path, "", nil, out)
}

// Events runs GET /events with raw query parameters and returns the
// events as served, unverified (Query verifies, and skips placeholders).
func (c *Client) Events(ctx context.Context, query url.Values) ([]*protocol.Event, error) {
	var evs []*protocol.Event
	err := c.GetJSON(ctx, "/events", query, &evs)
	return evs, err
}

func (c *Client) do(ctx context.Context, method, path, ct string, body []byte, out any) error {
	return c.doAuth(ctx, method, path, ct, body, out, "")
}

// doAuth is do with auth as the Authorization header ("": authorize's).
func (c *Client) doAuth(ctx context.Context, method, path, ct string, body []byte, out any, auth string) error {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, r)
	if err != nil {
		return err
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	} else {
		c.authorize(req, body)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
	if err != nil {
		return err
	}
	if len(b) > MaxResponse {
		return fmt.Errorf("%s %s: answer larger than %d bytes", method, path, MaxResponse)
	}
	if resp.StatusCode/100 != 2 {
		return decodeError(resp.StatusCode, b)
	}
	switch o := out.(type) {
	case nil:
		return nil
	case *[]byte: // the body as it is (text answers)
		*o = b
		return nil
	}
	return json.Unmarshal(b, out)
}

// authorize adds the D4 Authorization header when the client has a key:
// AuthHeader for this request alone.
func (c *Client) authorize(req *http.Request, body []byte) {
	if c.Key == nil {
		return
	}
	if body == nil && req.Method != http.MethodGet && req.Method != http.MethodHead && req.Method != http.MethodDelete {
		body = []byte{}
	}
	req.Header.Set("Authorization", AuthHeader(c.Key, req.Method, req.URL.String(), body, c.now().Unix()))
}

// now is the client's clock.
func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// AuthHeader returns the value of an "Authorization: ANP2 …" header (SPEC
// §3.2) proving priv's identity for one request: a kind 27235 signed now
// with ["u", url], ["method", method], ["payload", sha256 hex of body]
// whenever body is non-nil (an empty body included), and a random
// ["nonce", …] so that no two requests carry the same event (a relay may
// take each header once).
func AuthHeader(priv ed25519.PrivateKey, method, url string, body []byte, now int64) string {
	e := &protocol.Event{CreatedAt: now, Kind: protocol.KindHTTPAuth, Tags: [][]string{{"u", url}, {"method", method}}}
	if body != nil {
		sum := sha256.Sum256(body)
		e.Tags = append(e.Tags, []string{"payload", hex.EncodeToString(sum[:])})
	}
	var n [12]byte
	rand.Read(n[:])
	e.Tags = append(e.Tags, []string{"nonce", hex.EncodeToString(n[:])})
	e.Sign(priv)
	return "ANP2 " + base64.StdEncoding.EncodeToString(protocol.AppendJSON(nil, e))
}

func decodeError(status int, b []byte) error {
	e := &Error{Status: status, Body: b}
	var body struct {
		Detail any    `json:"detail"`
		Code   string `json:"code"`
	}
	if json.Unmarshal(b, &body) == nil {
		e.Code, e.Detail = body.Code, body.Detail
	}
	return e
}

// Export streams GET /export?after=...&seq=true, calling fn for each event
// with its log sequence number. It returns the last seq delivered, so a
// broken transfer can resume from there.
func (c *Client) Export(ctx context.Context, after int64, fn func(seq int64, raw json.RawMessage) error) (int64, error) {
	return c.ExportThrough(ctx, after, -1, fn)
}

// ExportThrough is Export stopping at seq through (through < 0: the log's
// end when the relay starts answering). Hidden events are served only to
// an authenticated reader: without Key, an export from which the relay
// left any out is an error rather than a silently incomplete log.
func (c *Client) ExportThrough(ctx context.Context, after, through int64, fn func(seq int64, raw json.RawMessage) error) (int64, error) {
	u := fmt.Sprintf("%s/export?after=%d&seq=true", c.Base, after)
	if through >= 0 {
		u += fmt.Sprintf("&through=%d", through)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return after, err
	}
	c.authorize(req, nil)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return after, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return after, decodeError(resp.StatusCode, b)
	}
	if n := resp.Header.Get("X-ANP2-Hidden-Omitted"); n != "" && n != "0" {
		return after, fmt.Errorf("the relay left out %s hidden events of an anonymous export: set Key to read the whole log", n)
	}
	if resp.Header.Get("X-ANP2-Restricted") == "true" {
		return after, fmt.Errorf("the relay left out invite_only agents' events of an anonymous export: set Key to read the whole log")
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		var line struct {
			Seq   int64           `json:"seq"`
			Event json.RawMessage `json:"event"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return after, fmt.Errorf("export line: %w", err)
		}
		if err := fn(line.Seq, line.Event); err != nil {
			return after, err
		}
		after = line.Seq
	}
	return after, sc.Err()
}
