package client

import (
	"container/list"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/protocol/sigverify"
)

// TriggerSpec asks the relay to push matching events to a target (SPEC
// §16 Trigger spec).
type TriggerSpec struct {
	Match    TriggerMatch    `json:"match"`
	Filter   []TriggerFilter `json:"filter,omitempty"`
	Throttle *Throttle       `json:"throttle,omitempty"`
	Target   TriggerTarget   `json:"target"`
}

// TriggerMatch selects events: lists are ORs, fields are ANDed; at least
// one field must be set.
type TriggerMatch struct {
	Kinds   []int64             `json:"kinds,omitempty"`
	Authors []string            `json:"authors,omitempty"`
	Tags    map[string][]string `json:"tags,omitempty"`
}

// TriggerFilter is a guard on the event's JSON content: Path "$" or
// "$.a.b", Operator eq, ne, lt, lte, gt, gte, in, not_in, contains,
// exists or regex.
type TriggerFilter struct {
	Path     string `json:"path"`
	Operator string `json:"operator"`
	Value    any    `json:"value,omitempty"`
}

// Throttle caps deliveries per window, per value of WindowKey.
type Throttle struct {
	MaxPerWindow  int    `json:"max_per_window"`
	WindowSeconds int    `json:"window_seconds"`
	WindowKey     string `json:"window_key,omitempty"`
}

// TriggerTarget is {"type": "webhook" or "a2a", "url"}: an https URL
// (the relay refuses private addresses unless its operator allows them).
type TriggerTarget struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// Trigger is a registered trigger.
type Trigger struct {
	ID        string      `json:"id"`
	Owner     string      `json:"owner"`
	FromSeq   int64       `json:"from_seq"`
	CreatedAt int64       `json:"created_at"`
	Spec      TriggerSpec `json:"spec"`
}

// CreateTrigger registers spec for c's agent (needs Key). The relay
// refuses a bad spec (400 invalid_trigger, webhook_target_refused) and
// more than its per-agent cap (429 too_many_triggers), as an *Error.
func (c *Client) CreateTrigger(ctx context.Context, spec TriggerSpec) (*Trigger, error) {
	if c.Key == nil {
		return nil, ErrNoIdentity
	}
	body, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	bits := c.TriggerPoW
	if bits == 0 {
		bits = DefaultTriggerPoW
	}
	var tr Trigger
	err = c.postTrigger(ctx, body, bits, &tr)
	var rerr *Error
	if errors.As(err, &rerr) && rerr.Code == codeTriggerPoW {
		if more := askedPoW(rerr); more > bits {
			err = c.postTrigger(ctx, body, more, &tr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create trigger: %w", err)
	}
	return &tr, nil
}

// DefaultTriggerPoW is the proof of work CreateTrigger mines when
// Client.TriggerPoW is 0: what `anp2 serve` asks for by default.
const DefaultTriggerPoW = 20

// codeTriggerPoW is the relay's code for a registration short of work.
const codeTriggerPoW = "trigger_pow_required"

// powAsked finds the ["pow", "<n>"] a trigger_pow_required detail names.
var powAsked = regexp.MustCompile(`\["pow", "(\d+)"\]`)

// askedPoW returns the bits a trigger_pow_required answer asks for, 0
// when it names none (or more than 32, which no client should mine).
func askedPoW(e *Error) int {
	d, _ := e.Detail.(string)
	m := powAsked.FindStringSubmatch(d)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n > 32 {
		return 0
	}
	return n
}

// postTrigger posts body to POST /triggers under an Authorization event
// mined to bits leading zero bits (none when bits < 0).
func (c *Client) postTrigger(ctx context.Context, body []byte, bits int, out *Trigger) error {
	sum := sha256.Sum256(body)
	var n [12]byte
	rand.Read(n[:])
	e := &protocol.Event{AgentID: protocol.AgentIDOf(c.Key), CreatedAt: c.now().Unix(), Kind: protocol.KindHTTPAuth,
		Tags: [][]string{{"u", c.Base + "/triggers"}, {"method", http.MethodPost}, {"payload", hex.EncodeToString(sum[:])}, {"nonce", hex.EncodeToString(n[:])}}}
	if bits > 0 {
		if err := MinePoW(ctx, e, bits, 0); err != nil {
			return err
		}
	}
	e.Sign(c.Key)
	auth := "ANP2 " + base64.StdEncoding.EncodeToString(protocol.AppendJSON(nil, e))
	return c.doAuth(ctx, http.MethodPost, "/triggers", "application/json", body, out, auth)
}

// Triggers lists c's own triggers.
func (c *Client) Triggers(ctx context.Context) ([]Trigger, error) {
	if c.Key == nil {
		return nil, ErrNoIdentity
	}
	var out struct {
		Triggers []Trigger `json:"triggers"`
	}
	return out.Triggers, c.GetJSON(ctx, "/triggers", nil, &out)
}

// DeleteTrigger removes one of c's triggers; another agent's or an
// unknown one is an *Error with status 404.
func (c *Client) DeleteTrigger(ctx context.Context, id string) error {
	if c.Key == nil {
		return ErrNoIdentity
	}
	return c.do(ctx, http.MethodDelete, "/triggers/"+url.PathEscape(id), "", nil, nil)
}

// Delivery is one queued push of an event to a trigger's target.
type Delivery struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	TriggerID      string `json:"trigger_id"`
	EventID        string `json:"event_id"`
	Seq            int64  `json:"seq"`
	Target         string `json:"target"`
	TargetType     string `json:"target_type"`
	Depth          int    `json:"depth"`
	Status         string `json:"status"` // pending, dispatched, locked, escalated, delivered, failed
	OwnerLease     int64  `json:"owner_lease"`
	Attempts       int    `json:"attempts"`
	NextAttemptAt  int64  `json:"next_attempt_at_ms"`
	Deadline       int64  `json:"deadline_ms"`
	LastError      string `json:"last_error"`
	CreatedAt      int64  `json:"created_at_ms"`
	UpdatedAt      int64  `json:"updated_at_ms"`
}

// Deliveries lists c's deliveries, newest first; status "" is any, limit
// 0 the relay's default.
func (c *Client) Deliveries(ctx context.Context, status string, limit int) ([]Delivery, error) {
	if c.Key == nil {
		return nil, ErrNoIdentity
	}
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Deliveries []Delivery `json:"deliveries"`
	}
	return out.Deliveries, c.GetJSON(ctx, "/deliveries", q, &out)
}

// Webhook is one verified webhook request (SPEC §16 Webhook request).
type Webhook struct {
	DeliveryID     string          `json:"delivery_id"`
	InvocationID   string          `json:"invocation_id"` // tag replies ["triggered_by", it]
	TriggerID      string          `json:"trigger_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	OwnerLease     int64           `json:"owner_lease"`
	Attempt        int             `json:"attempt"`
	Event          *protocol.Event `json:"event"`
}

// Errors of VerifyWebhook.
var (
	ErrWebhookSignature = errors.New("webhook signature does not verify under the relay's key")
	ErrWebhookStale     = errors.New("webhook timestamp is too far from now")
	ErrWebhookRelay     = errors.New("webhook comes from another relay")
)

// WebhookVerifier checks the relay's signature on webhook requests. Relay
// pins the relay's agent_id (from its kind 10 or GET /relays' self);
// MaxSkew bounds the timestamp's distance from Now (default 5 minutes).
type WebhookVerifier struct {
	Relay   string
	MaxSkew time.Duration
	Now     func() time.Time
}

// MaxWebhookBody bounds the body VerifyWebhook reads: the relay's publish
// body cap plus the envelope.
const MaxWebhookBody = 2 << 20

// Verify reads r's body and checks it: the X-ANP2-Relay header names the
// pinned relay (ErrWebhookRelay), X-ANP2-Timestamp is within MaxSkew
// (ErrWebhookStale), X-ANP2-Signature is the relay's Ed25519 signature
// over "<timestamp>.<body>" by libsodium's rules (ErrWebhookSignature),
// and the event inside verifies (ErrBadEvent).
func (v *WebhookVerifier) Verify(r *http.Request) (*Webhook, error) {
	if r.Header.Get("X-ANP2-Relay") != v.Relay {
		return nil, ErrWebhookRelay
	}
	ts := r.Header.Get("X-ANP2-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return nil, ErrWebhookStale
	}
	now, skew := time.Now(), v.MaxSkew
	if v.Now != nil {
		now = v.Now()
	}
	if skew <= 0 {
		skew = 5 * time.Minute
	}
	if d := now.Sub(time.Unix(sec, 0)); d > skew || d < -skew {
		return nil, ErrWebhookStale
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxWebhookBody+1))
	if err != nil || len(body) > MaxWebhookBody {
		return nil, fmt.Errorf("webhook body: too large or unreadable")
	}
	pub, err1 := hex.DecodeString(v.Relay)
	sig, err2 := hex.DecodeString(r.Header.Get("X-ANP2-Signature"))
	if err1 != nil || err2 != nil || len(pub) != 32 || len(sig) != 64 ||
		!sigverify.Default.Verify(pub, append([]byte(ts+"."), body...), sig) {
		return nil, ErrWebhookSignature
	}
	var w Webhook
	if err := json.Unmarshal(body, &w); err != nil || w.Event == nil {
		return nil, fmt.Errorf("webhook body: not a delivery")
	}
	if err := VerifyEvent(w.Event); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	return &w, nil
}

// WebhookHandler returns an http.Handler that verifies each webhook with
// v and calls fn once per idempotency key (the relay delivers at least
// once; the last 4096 keys handled are remembered). It answers 401 to a
// request that does not verify, 500 when fn fails (so the relay tries
// again later) and 200 otherwise.
func WebhookHandler(v *WebhookVerifier, fn func(context.Context, *Webhook) error) http.Handler {
	seen := newKeySet(4096)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		hook, err := v.Verify(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if seen.has(hook.IdempotencyKey) {
			w.WriteHeader(http.StatusOK)
			return
		}
		if err := fn(r.Context(), hook); err != nil {
			http.Error(w, "handler failed", http.StatusInternalServerError)
			return
		}
		seen.add(hook.IdempotencyKey)
		w.WriteHeader(http.StatusOK)
	})
}

// keySet remembers the last n keys added.
type keySet struct {
	mu    sync.Mutex
	n     int
	order *list.List
	keys  map[string]*list.Element
}

func newKeySet(n int) *keySet {
	return &keySet{n: n, order: list.New(), keys: map[string]*list.Element{}}
}

func (s *keySet) has(k string) bool { s.mu.Lock(); defer s.mu.Unlock(); return s.keys[k] != nil }

func (s *keySet) add(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys[k] != nil {
		return
	}
	s.keys[k] = s.order.PushBack(k)
	if s.order.Len() > s.n {
		old := s.order.Remove(s.order.Front()).(string)
		delete(s.keys, old)
	}
}
