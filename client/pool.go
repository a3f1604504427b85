package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
)

// Pool spreads one agent over several relays: it publishes every event to
// all of them, reads from the healthiest, and moves on to the next when
// one fails. Log sequences belong to one relay, so subscriptions are
// opened on one member (Pool.Best) rather than on the pool.
type Pool struct {
	mu      sync.Mutex
	members []*member
	key     *Identity
	// Cooldown is how long a failed relay is tried last (default 30 s).
	Cooldown time.Duration
}

type member struct {
	c        *Client
	failedAt time.Time     // zero: healthy
	latency  time.Duration // of the last successful call
}

// NewPool returns a pool over urls signing as id (nil: read only).
func NewPool(id *Identity, urls ...string) *Pool {
	p := &Pool{key: id, Cooldown: 30 * time.Second}
	for _, u := range urls {
		p.Add(u)
	}
	return p
}

// Add adds the relay at url unless the pool has it already.
func (p *Pool) Add(url string) {
	url = strings.TrimRight(url, "/")
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.members {
		if m.c.Base == url {
			return
		}
	}
	c := New(url)
	if p.key != nil {
		c.Key = p.key.PrivateKey()
	}
	p.members = append(p.members, &member{c: c})
}

// Clients returns the members, healthiest first: relays that have not
// failed within Cooldown by latency, then the rest by how long ago they
// failed.
func (p *Pool) Clients() []*Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	ms := slices.Clone(p.members)
	down := func(m *member) bool { return !m.failedAt.IsZero() && now.Sub(m.failedAt) < p.Cooldown }
	slices.SortStableFunc(ms, func(a, b *member) int {
		da, db := down(a), down(b)
		switch {
		case da != db:
			if da {
				return 1
			}
			return -1
		case da:
			return a.failedAt.Compare(b.failedAt)
		}
		return int(a.latency - b.latency)
	})
	out := make([]*Client, len(ms))
	for i, m := range ms {
		out[i] = m.c
	}
	return out
}

// Best returns the healthiest member.
func (p *Pool) Best() *Client { return p.Clients()[0] }

func (p *Pool) record(c *Client, took time.Duration, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.members {
		if m.c == c {
			if err != nil && failover(err) {
				m.failedAt = time.Now()
			} else {
				m.failedAt, m.latency = time.Time{}, took
			}
		}
	}
}

// failover reports whether err means "this relay cannot answer now"
// rather than an answer: a transport error, 429 or a 5xx.
func failover(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Status == http.StatusTooManyRequests || e.Status >= 500
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, ErrNoIdentity)
}

// Read calls fn with members, healthiest first, until one answers: fn's
// result is returned as soon as it is nil or an answer of the relay (a
// 4xx other than 429). When every member fails it returns the errors
// joined.
func (p *Pool) Read(ctx context.Context, fn func(*Client) error) error {
	var errs []error
	for _, c := range p.Clients() {
		start := time.Now()
		err := fn(c)
		p.record(c, time.Since(start), err)
		if err == nil || !failover(err) || ctx.Err() != nil {
			return err
		}
		errs = append(errs, fmt.Errorf("%s: %w", c.Base, err))
	}
	return errors.Join(errs...)
}

// Query runs Client.Query on the healthiest member that answers.
func (p *Pool) Query(ctx context.Context, f Filter, opts ...ReadOption) ([]*protocol.Event, error) {
	var out []*protocol.Event
	err := p.Read(ctx, func(c *Client) (err error) { out, err = c.Query(ctx, f, opts...); return err })
	return out, err
}

// Task runs Client.Task on the healthiest member that answers.
func (p *Pool) Task(ctx context.Context, taskID string) (*Task, error) {
	var out *Task
	err := p.Read(ctx, func(c *Client) (err error) { out, err = c.Task(ctx, taskID); return err })
	return out, err
}

// RelayResult is one member's answer to a pool publish.
type RelayResult struct {
	Relay  string
	Result *PublishResult
	Err    error
}

// Send signs e once and publishes it to every member at the same time.
// It succeeds when at least one relay stored it (the others catch up by
// mirroring, or the caller retries them) and returns every answer; when
// none did, the error joins theirs.
func (p *Pool) Send(ctx context.Context, e *protocol.Event) ([]RelayResult, error) {
	if e.Sig == "" {
		if p.key == nil {
			return nil, ErrNoIdentity
		}
		if err := Sign(ctx, p.key, e, time.Now()); err != nil {
			return nil, err
		}
	}
	cs := p.Clients()
	out := make([]RelayResult, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			res, err := c.Publish(ctx, e, false)
			p.record(c, time.Since(start), err)
			out[i] = RelayResult{Relay: c.Base, Result: res, Err: err}
		}()
	}
	wg.Wait()
	var errs []error
	for _, r := range out {
		if r.Err == nil {
			return out, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", r.Relay, r.Err))
	}
	return out, errors.Join(errs...)
}

// FollowHomeRelays adds the relays agentID names in its profile's
// home_relays (a list of URLs in its latest kind 0) and returns them.
func (p *Pool) FollowHomeRelays(ctx context.Context, agentID string) ([]string, error) {
	evs, err := p.Query(ctx, Filter{Authors: []string{agentID}, Kinds: []int64{protocol.KindProfile}, Limit: 1})
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	var prof struct {
		HomeRelays []string `json:"home_relays"`
	}
	if json.Unmarshal([]byte(evs[0].Content), &prof) != nil {
		return nil, nil
	}
	var added []string
	for _, u := range prof.HomeRelays {
		if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
			p.Add(u)
			added = append(added, u)
		}
	}
	return added, nil
}
