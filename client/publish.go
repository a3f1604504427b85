package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/anp2net/relay/protocol"
)

// ErrNoIdentity: a signing method was called on a Client without Key.
var ErrNoIdentity = errors.New("client has no key: set Client.Key or use NewAgent")

// NewAgent returns a client for base that signs and authenticates as id.
func NewAgent(base string, id *Identity) *Client {
	c := New(base)
	c.Key = id.PrivateKey()
	return c
}

// Identity returns the identity of c.Key, nil when c has no key.
func (c *Client) Identity() *Identity {
	if c.Key == nil {
		return nil
	}
	return NewIdentity(c.Key)
}

// AgentID returns c's agent_id, "" when c has no key.
func (c *Client) AgentID() string {
	if c.Key == nil {
		return ""
	}
	return protocol.AgentIDOf(c.Key)
}

// Sign completes e as c's agent at c's clock (the package's Sign: agent_id,
// created_at, proof of work where required, id, signature). It fails with
// ErrNoIdentity without a key.
func (c *Client) Sign(ctx context.Context, e *protocol.Event) error {
	if c.Key == nil {
		return ErrNoIdentity
	}
	return Sign(ctx, c.Identity(), e, c.now())
}

// Warning is a departure from the seed the relay accepted and reported
// (decision D17).
type Warning struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// Send signs e (when it has no signature yet) and publishes it. On
// success e holds its id: for a kind 50 that is the task_id. A refusal is
// an *Error with the relay's code.
func (c *Client) Send(ctx context.Context, e *protocol.Event) (*PublishResult, error) {
	if e.Sig == "" {
		if err := c.Sign(ctx, e); err != nil {
			return nil, err
		}
	}
	return c.Publish(ctx, e, false)
}

// SendAll signs the unsigned events of evs and publishes them in one
// POST /events/batch (at most 1000): each is judged alone, and the answer
// has one result per event in order. Only a refused batch as a whole is
// an error; check Rejected and each result's Status.
func (c *Client) SendAll(ctx context.Context, evs ...*protocol.Event) (*BatchResult, error) {
	for _, e := range evs {
		if e.Sig == "" {
			if err := c.Sign(ctx, e); err != nil {
				return nil, err
			}
		}
	}
	return c.PublishBatch(ctx, evs)
}

// Violation is one broken rule a dry run found.
type Violation struct {
	Code   string `json:"code"`
	Detail any    `json:"detail"`
}

// DryRunResult is the answer of POST /events/dry-run: every violation the
// relay found, none stored.
type DryRunResult struct {
	ID         string      `json:"id"`
	Valid      bool        `json:"valid"`
	Duplicate  bool        `json:"duplicate"`
	Violations []Violation `json:"violations"`
}

// Codes returns the codes of the violations, in order.
func (r *DryRunResult) Codes() []string {
	out := make([]string, len(r.Violations))
	for i, v := range r.Violations {
		out[i] = v.Code
	}
	return out
}

// DryRun runs every publish check on e without storing it (signing it
// first when it has no signature) and returns every violation. A
// malformed envelope is an *Error with status 422.
func (c *Client) DryRun(ctx context.Context, e *protocol.Event) (*DryRunResult, error) {
	if e.Sig == "" {
		if err := c.Sign(ctx, e); err != nil {
			return nil, err
		}
	}
	var res DryRunResult
	if err := c.do(ctx, http.MethodPost, "/events/dry-run", "application/json", protocol.AppendJSON(nil, e), &res); err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
	}
	return &res, nil
}

// SendDM seals plaintext for recipient (SealDM: crypto_box, padded to its
// bucket) and publishes it as a kind 3; only the two agents can open it
// (OpenDM, Inbox, Outbox). It fails with ErrDMTooLarge past
// MaxDMPlaintext and ErrDMBadKey for an unusable recipient.
func (c *Client) SendDM(ctx context.Context, recipient string, plaintext []byte) (*protocol.Event, error) {
	if c.Key == nil {
		return nil, ErrNoIdentity
	}
	e, err := SealDM(c.Key, recipient, plaintext, nil)
	if err != nil {
		return nil, err
	}
	if _, err := c.Send(ctx, e); err != nil {
		return nil, fmt.Errorf("send dm: %w", err)
	}
	return e, nil
}
