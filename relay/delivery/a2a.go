package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// A2A targets (SPEC §16): the trigger names an agent card; the relay reads
// the card's JSON-RPC endpoint and delivers each match as message/send.

// Limits of A2A targets.
const (
	cardTTL      = 5 * time.Minute // a card is read again after this
	maxCards     = 1024            // cached cards; beyond, the cache starts over
	maxCardBytes = 256 << 10
	maxRPCAnswer = 1 << 20
)

// A2AMetadataKey names the message metadata member holding the attempt
// (an Attempt) in a message/send the relay delivers.
const A2AMetadataKey = "anp2"

// agentCard is what the relay reads of an A2A agent card.
type agentCard struct {
	URL                  string `json:"url"`
	PreferredTransport   string `json:"preferredTransport"`
	AdditionalInterfaces []struct {
		URL       string `json:"url"`
		Transport string `json:"transport"`
	} `json:"additionalInterfaces"`
}

// endpoint returns the card's JSON-RPC URL: url when the preferred
// transport is JSON-RPC (the default), else the additional interface
// that is.
func (c *agentCard) endpoint() (string, error) {
	if c.PreferredTransport == "" || c.PreferredTransport == "JSONRPC" {
		if c.URL == "" {
			return "", fmt.Errorf("agent card has no url")
		}
		return c.URL, nil
	}
	for _, i := range c.AdditionalInterfaces {
		if i.Transport == "JSONRPC" && i.URL != "" {
			return i.URL, nil
		}
	}
	return "", fmt.Errorf("agent card offers no JSONRPC interface (preferred transport %q)", clip(c.PreferredTransport))
}

// cardCache holds resolved JSON-RPC endpoints by card URL, for cardTTL of
// the relay clock.
type cardCache struct {
	mu sync.Mutex
	m  map[string]cardEntry
	// reading holds the cards being read, each closed when its read
	// ends: concurrent attempts to one card read it once.
	reading map[string]chan struct{}
}

// begin returns the channel of a read of card under way, or nil after
// marking one as under way for the caller (who must call end).
func (cc *cardCache) begin(card string) chan struct{} {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if ch, ok := cc.reading[card]; ok {
		return ch
	}
	if cc.reading == nil {
		cc.reading = map[string]chan struct{}{}
	}
	cc.reading[card] = make(chan struct{})
	return nil
}

func (cc *cardCache) end(card string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	close(cc.reading[card])
	delete(cc.reading, card)
}

type cardEntry struct {
	rpc   string
	until int64 // ms
}

func (cc *cardCache) get(card string, now int64) (string, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	e, ok := cc.m[card]
	if !ok || now >= e.until {
		return "", false
	}
	return e.rpc, true
}

func (cc *cardCache) put(card, rpc string, now int64) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.m == nil || len(cc.m) >= maxCards {
		cc.m = map[string]cardEntry{}
	}
	cc.m[card] = cardEntry{rpc: rpc, until: now + cardTTL.Milliseconds()}
}

// forget drops card, so the next attempt reads it again (its endpoint
// failed).
func (cc *cardCache) forget(card string) {
	cc.mu.Lock()
	delete(cc.m, card)
	cc.mu.Unlock()
}

// resolveCard returns the JSON-RPC endpoint of the agent card at card,
// from the cache or by reading the card (with the webhook client: the
// same address rules, no redirect).
func (m *Module) resolveCard(ctx context.Context, card string) (string, error) {
	now := m.now()
	for {
		if rpc, ok := m.cards.get(card, now); ok {
			return rpc, nil
		}
		ch := m.cards.begin(card)
		if ch == nil {
			break
		}
		select { // another attempt reads it: its result, or our turn
		case <-ch:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		now = m.now()
	}
	defer m.cards.end(card)
	rctx, cancel := context.WithTimeout(ctx, m.opts.SendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, card, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("agent card: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("agent card answered %d", resp.StatusCode)
	}
	var c agentCard
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxCardBytes)).Decode(&c); err != nil {
		return "", fmt.Errorf("agent card: %v", err)
	}
	rpc, err := c.endpoint()
	if err != nil {
		return "", err
	}
	if err := checkURL("the agent card's url", rpc, m.opts.AllowPrivate); err != nil {
		return "", err
	}
	m.cards.put(card, rpc, now)
	return rpc, nil
}

// rpcRequest is the JSON-RPC message/send the relay sends.
type rpcRequest struct {
	JSONRPC string     `json:"jsonrpc"`
	ID      string     `json:"id"`
	Method  string     `json:"method"`
	Params  sendParams `json:"params"`
}

type sendParams struct {
	Message a2aMessage `json:"message"`
}

// a2aMessage is an A2A Message with one data part: the event.
type a2aMessage struct {
	Kind      string             `json:"kind"`
	Role      string             `json:"role"`
	MessageID string             `json:"messageId"`
	Parts     []a2aPart          `json:"parts"`
	Metadata  map[string]Attempt `json:"metadata"`
}

type a2aPart struct {
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
}

// rpcAnswer is a JSON-RPC response.
type rpcAnswer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// sendA2A delivers c as message/send to its agent: the event is the
// message's one data part, the attempt its metadata (under
// A2AMetadataKey), and its messageId the idempotency key, the same on
// every attempt. A JSON-RPC result is success; a JSON-RPC error, a non-2xx
// answer or anything else is a failed attempt.
func (m *Module) sendA2A(ctx context.Context, c claimed) error {
	ev, err := m.eventBody(ctx, c.eventID)
	if err != nil {
		return err
	}
	rpc, err := m.resolveCard(ctx, c.target)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: c.id, Method: "message/send", Params: sendParams{Message: a2aMessage{
		Kind: "message", Role: "user", MessageID: c.idemKey,
		Parts:    []a2aPart{{Kind: "data", Data: ev}},
		Metadata: map[string]Attempt{A2AMetadataKey: c.attempt()},
	}}})
	status, ans, err := m.post(ctx, c, rpc, body, maxRPCAnswer)
	if err != nil || status/100 != 2 {
		m.cards.forget(c.target)
		if err != nil {
			return err
		}
		return fmt.Errorf("a2a agent answered %d", status)
	}
	var a rpcAnswer
	if err := json.Unmarshal(ans, &a); err != nil || a.JSONRPC != "2.0" {
		return fmt.Errorf("a2a agent's answer is not a JSON-RPC 2.0 response")
	}
	if a.Error != nil {
		return fmt.Errorf("a2a agent answered JSON-RPC error %d: %s", a.Error.Code, clip(a.Error.Message))
	}
	if string(a.ID) != `"`+c.id+`"` {
		return fmt.Errorf("a2a agent answered another request id")
	}
	if len(a.Result) == 0 || string(a.Result) == "null" {
		return fmt.Errorf("a2a agent's answer has neither result nor error")
	}
	return nil
}
