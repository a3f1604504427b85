package ws

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/stream"
	"github.com/coder/websocket"
)

// conn is one upgraded connection: a read loop dispatching client frames,
// one goroutine per subscription writing its events, and a pinger.
type conn struct {
	m   *Module
	ws  *websocket.Conn
	cc  *corkConn // the connection under ws
	req *http.Request
	ip  string
	// addr keys the client address's read budget (IPv6 by /64); rows is
	// the connection's own, under the module's budget lock.
	addr string
	rows stream.RowBucket
	// quota bounds the bytes waiting for all the connection's
	// subscriptions (Options.QueueBytes).
	quota *stream.Quota

	ctx    context.Context
	cancel context.CancelFunc

	// reqWindow and reqs count REQs in the current minute (relay clock).
	reqWindow int64
	reqs      int

	// seed says the connection speaks the seed's dialect (GET /subscribe,
	// seed.go): frames are translated at parse and write.
	seed bool

	mu     sync.Mutex
	reader string
	subs   map[string]*sub
	wg     sync.WaitGroup
	once   sync.Once
}

// sub is one REQ.
type sub struct {
	id     string
	cancel context.CancelFunc
}

func newConn(m *Module, wsc *websocket.Conn, cc *corkConn, r *http.Request, ip, key, reader string) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	// A frame is at most a POST /events body plus its framing.
	wsc.SetReadLimit(m.core.Config().MaxBody + 4096)
	return &conn{m: m, ws: wsc, cc: cc, req: r, ip: ip, addr: key, quota: stream.NewQuota(m.opts.QueueBytes),
		ctx: ctx, cancel: cancel, reader: reader, subs: map[string]*sub{}}
}

// serve runs the connection until the client leaves or it is shut.
func (c *conn) serve() {
	defer c.wg.Wait()
	defer c.cancel()
	c.wg.Add(1)
	go c.pinger()
	for {
		typ, msg, err := c.ws.Read(c.ctx)
		if err != nil {
			c.shut(websocket.StatusNormalClosure, "")
			return
		}
		if typ != websocket.MessageText {
			c.notice(bad("frames are JSON text messages"))
			continue
		}
		f, err := c.parse(msg)
		if err != nil {
			c.notice(err)
			continue
		}
		switch f.Type {
		case TypeReq:
			c.subscribe(f)
		case TypeClose:
			c.closeSub(f.SubID)
			c.send([]byte(`["CLOSED",` + quote(f.SubID) + `,""]`))
		case TypeEvent:
			c.event(f.Event)
		case TypeAuth:
			c.auth(f.Event)
		}
	}
}

// shut closes the connection once, with code and reason, and then ends
// its goroutines. In that order: cancelling c.ctx first would make the
// reader's pending Read close the connection at once, racing the close
// frame (the client then saw the connection end without it). The close
// handshake (which coder/websocket bounds at 5 s) has closeWait to finish
// before the connection is cut anyway; it goes on in the background.
func (c *conn) shut(code websocket.StatusCode, reason string) {
	c.once.Do(func() {
		done := make(chan struct{})
		go func() {
			_ = c.ws.Close(code, reason)
			close(done)
		}()
		t := time.NewTimer(closeWait)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
		c.cancel()
	})
}

// closeWait is how long shut lets a close handshake run.
const closeWait = time.Second

func (c *conn) pinger() {
	defer c.wg.Done()
	t := time.NewTicker(c.m.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(c.ctx, c.m.opts.WriteTimeout)
			err := c.ws.Ping(ctx)
			cancel()
			if err != nil {
				c.shut(websocket.StatusPolicyViolation, "no pong")
				return
			}
		}
	}
}

// send writes one frame, closing the connection when the client does not
// take it within WriteTimeout.
func (c *conn) send(frame []byte) bool {
	ctx, cancel := context.WithTimeout(c.ctx, c.m.opts.WriteTimeout)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, c.frame(frame)); err != nil {
		c.shut(websocket.StatusPolicyViolation, "write failed or timed out")
		return false
	}
	return true
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// reason renders an error as "code: detail" (NIP-01's machine-readable
// prefix); internal errors are not shown.
func reason(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code + ": " + pe.Detail
	}
	return "error: internal error"
}

func (c *conn) notice(err error) {
	c.send([]byte(`["NOTICE",` + quote(reason(err)) + `]`))
}

// event is an EVENT frame: a publish with POST /events' rules, answered
// ["OK", id, accepted, message].
func (c *conn) event(raw json.RawMessage) {
	e, err := protocol.DecodeJSON(raw)
	if err != nil {
		c.m.core.CountRejected(err)
		c.ok(idOf(raw), false, reason(err))
		return
	}
	ans, err := c.m.core.Ingest(c.ctx, e, raw, "json", c.ip)
	if err != nil {
		c.m.core.CountRejected(err)
		c.ok(e.ID, false, reason(err))
		return
	}
	msg := ""
	if ans.Duplicate {
		msg = "duplicate: already stored"
	} else if len(ans.Warnings) > 0 {
		msg = warningMessage(ans.Warnings)
	}
	c.ok(ans.ID, true, msg)
}

// idOf returns the "id" member of an undecodable event, when it is a
// string, so the OK frame can name it.
func idOf(raw json.RawMessage) string {
	var x struct {
		ID any `json:"id"`
	}
	_ = json.Unmarshal(raw, &x)
	s, _ := x.ID.(string)
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

func (c *conn) ok(id string, accepted bool, msg string) {
	c.send([]byte(`["OK",` + quote(id) + `,` + strconv.FormatBool(accepted) + `,` + quote(msg) + `]`))
}

// auth is an AUTH frame: the D4 event, checked against the upgrade
// request's method (GET) and URL. Subscriptions opened afterwards see
// what the authenticated reader may see.
func (c *conn) auth(raw json.RawMessage) {
	e, err := c.m.core.AuthenticateEvent(c.req, raw)
	if err != nil {
		c.ok(idOf(raw), false, reason(err))
		return
	}
	c.mu.Lock()
	c.reader = e.AgentID
	c.mu.Unlock()
	c.ok(e.ID, true, "")
}

// subscribe opens (or replaces) a subscription.
func (c *conn) subscribe(f Frame) {
	if !c.allowReq() {
		c.closed(f.SubID, protocol.Errorf(stream.CodeRateLimited, "at most %d REQs per minute per connection", c.m.opts.MaxReqsPerMinute))
		return
	}
	q, limit, err := FilterQuery(f.Filter)
	var filter *stream.Filter
	if err == nil {
		filter, err = stream.ParseFilterWith(q, c.m.core)
	}
	if err == nil {
		var keep func(*protocol.Event) bool
		if keep, _, err = c.m.core.BranchFilter(filter.Branches); err == nil {
			filter.SetBranch(keep)
		}
	}
	if err != nil {
		c.closed(f.SubID, err)
		return
	}
	if ok, wait := c.m.take(c, reqCost); !ok {
		c.closed(f.SubID, c.spent(wait, nil))
		return
	}
	c.closeSub(f.SubID)
	c.mu.Lock()
	if len(c.subs) >= c.m.opts.MaxSubscriptions {
		c.mu.Unlock()
		c.closed(f.SubID, protocol.Errorf(CodeTooManySubscriptions, "at most %d open subscriptions per connection; CLOSE one first", c.m.opts.MaxSubscriptions))
		return
	}
	reader := c.reader
	s, err := c.m.hub.SubscribeQuota(filter, reader, c.quota)
	if err != nil {
		c.mu.Unlock()
		c.closed(f.SubID, err)
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	me := &sub{id: f.SubID, cancel: cancel}
	c.subs[f.SubID] = me
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer s.Close()
		c.run(ctx, me, filter, limit, s)
	}()
}

func (c *conn) closed(id string, err error) {
	c.send([]byte(`["CLOSED",` + quote(id) + `,` + quote(reason(err)) + `]`))
}

// dropSub forgets subscription me and ends it, unless a REQ has
// replaced it under its id meanwhile (which it must not end).
func (c *conn) dropSub(me *sub) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs[me.id] == me {
		delete(c.subs, me.id)
	}
	me.cancel()
}

// closeSub ends subscription id, if open.
func (c *conn) closeSub(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.subs[id]; ok {
		s.cancel()
		delete(c.subs, id)
	}
}

// run is one subscription: stored matches (a replay from the log after
// f.After, or the newest limit matches), EOSE, then live events.
func (c *conn) run(ctx context.Context, me *sub, f *stream.Filter, limit int, s *stream.Subscription) {
	id := me.id
	w := &subWriter{c: c, prefix: []byte(`["EVENT",` + quote(id) + `,`)}
	var through, pos int64
	var err error
	var sent map[string]struct{}
	if f.After != nil {
		through, pos, err = c.replay(ctx, *f.After, s, func(seq int64, body []byte) error {
			if !w.event(seq, body) {
				return context.Canceled
			}
			return nil
		})
	} else {
		if through, err = s.Replay(ctx, math.MaxInt64, func(int64, []byte) error { return nil }); err == nil {
			sent, err = c.stored(ctx, w, f, limit, s)
		}
	}
	if err != nil {
		var sp *spentError
		switch {
		case ctx.Err() != nil || c.ctx.Err() != nil:
		case errors.As(err, &sp):
			// Forgotten first: the client may REQ the same id as soon as
			// it reads the CLOSED.
			c.dropSub(me)
			c.closed(id, sp.reason)
		default:
			// A replay that failed resumes where it got to; a REQ
			// without after, at the log's end it learned.
			c.end(me, s, max(pos, through))
		}
		return
	}
	if !c.send([]byte(`["EOSE",` + quote(id) + `,` + strconv.FormatInt(through, 10) + `]`)) {
		return
	}
	pos = through
	var wrote time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.Gone():
			c.end(me, s, pos)
			return
		case <-s.Wake():
		}
		if time.Since(wrote) < c.m.opts.Coalesce {
			// Busy: gather until the next tick (Options.Coalesce).
			select {
			case <-ctx.Done():
				return
			case <-s.Gone():
				c.end(me, s, pos)
				return
			case <-c.m.nextTick():
			}
		}
		wrote = time.Now()
		if !c.flush(s, w, sent, through, &pos) {
			return
		}
	}
}

// flush writes what s has queued, in one write; false when the
// connection failed.
func (c *conn) flush(s *stream.Subscription, w *subWriter, sent map[string]struct{}, through int64, pos *int64) bool {
	frames, seen := s.Take()
	// What woke us goes out in one write (see corkConn).
	w.cork()
	for _, fr := range frames {
		if fr.Meta || (sent == nil && fr.Seq <= through) {
			continue
		}
		if _, dup := sent[fr.Event.ID]; dup {
			continue
		}
		if c.m.hub.Visible(s.Reader(), fr.Event) && !w.event(fr.Seq, fr.Body) {
			w.uncork()
			return false
		}
		*pos = max(*pos, fr.Seq)
	}
	if !w.uncork() {
		return false
	}
	*pos = max(*pos, seen)
	return true
}

// spentError ends a REQ whose read budget ran out; reason is its
// CLOSED message (rate_limited).
type spentError struct{ reason error }

func (e *spentError) Error() string { return e.reason.Error() }

// Unwrap returns the *protocol.Error.
func (e *spentError) Unwrap() error { return e.reason }

// spent is the CLOSED reason of a REQ the read budget cannot cover,
// naming when to retry and, for a replay, where to resume (after).
func (c *conn) spent(wait time.Duration, after *int64) error {
	o := c.m.opts
	if after != nil {
		return &spentError{protocol.Errorf(stream.CodeRateLimited, "REQ read budget spent (%d stored rows a minute per connection, %d per address); REQ again with after=%d in %d s",
			o.ReqRows, o.ReqRowsPerAddr, *after, seconds(wait))}
	}
	return &spentError{protocol.Errorf(stream.CodeRateLimited, "REQ read budget spent (%d stored rows a minute per connection, %d per address); retry in %d s",
		o.ReqRows, o.ReqRowsPerAddr, seconds(wait))}
}

// replay calls fn for the stored matches after seq after in log order,
// charging every row read to the read budget; when it runs out it fails
// with a *spentError naming where to resume. pos is the sequence up to
// which every row was handled, where a failed replay resumes.
func (c *conn) replay(ctx context.Context, after int64, s *stream.Subscription, fn func(seq int64, body []byte) error) (through, pos int64, err error) {
	pos = after
	through, err = s.ReplayCounted(ctx, after, func(seq int64) error {
		pos = seq - 1 // rows are read in log order: all below seq were handled
		if ok, wait := c.m.take(c, 1); !ok {
			return c.spent(wait, &pos)
		}
		return nil
	}, fn)
	return through, pos, err
}

// storeFilter is the whole of f that the log can apply (everything but
// the branch and extra-parameter tests, and visibility), newest first,
// limit rows: a repeated tag name goes in MoreTags.
func (c *conn) storeFilter(f *stream.Filter, limit int) eventlog.Filter {
	q := eventlog.Filter{IDs: f.IDs, Kinds: f.Kinds, Authors: f.Authors, Since: f.Since, Until: f.Until,
		Limit: limit, Revoked: c.m.core.State().Revoked}
	for _, t := range f.Tags {
		if _, ok := q.Tags[t.Name]; !ok {
			if q.Tags == nil {
				q.Tags = map[string][]string{}
			}
			q.Tags[t.Name] = t.Values
			continue
		}
		q.MoreTags = append(q.MoreTags, eventlog.TagCond{Name: t.Name, Values: t.Values})
	}
	return q
}

// stored sends the newest limit stored matches of f (GET /events' order),
// returning their ids so live copies are not sent again. The log applies
// the filter and the limit; what only the relay can judge (branch,
// extra parameters, visibility) is applied to the rows it returns, and
// when that leaves fewer than limit while the log has more, it asks for
// twice as many. Every row returned is charged to the read budget,
// reserved before each query; when it cannot pay, the REQ fails with a
// *spentError and nothing is sent.
func (c *conn) stored(ctx context.Context, w *subWriter, f *stream.Filter, limit int, s *stream.Subscription) (map[string]struct{}, error) {
	if f.Never() { // an org: or tool: clause: no stored event can match
		return map[string]struct{}{}, nil
	}
	q := c.storeFilter(f, limit)
	var out [][]byte
	var ids []string
	done := map[string]struct{}{}
	for want := limit; ; want *= 2 {
		if ok, wait := c.m.take(c, want); !ok {
			return nil, c.spent(wait, nil)
		}
		q.Limit = want
		bodies, err := c.m.core.Log().Query(ctx, q)
		c.m.refund(c, want-len(bodies))
		if err != nil {
			return nil, err
		}
		for _, b := range bodies {
			var ev protocol.Event
			if json.Unmarshal(b, &ev) != nil {
				continue
			}
			if _, dup := done[ev.ID]; dup {
				continue // read by an earlier, smaller query
			}
			done[ev.ID] = struct{}{}
			if len(out) < limit && f.Match(&ev) && c.m.hub.Visible(s.Reader(), &ev) {
				out, ids = append(out, b), append(ids, ev.ID)
			}
		}
		if len(out) >= limit || len(bodies) < want {
			break
		}
	}
	sent := make(map[string]struct{}, len(out))
	for i, b := range out {
		if !w.event(0, b) {
			return nil, context.Canceled
		}
		sent[ids[i]] = struct{}{}
	}
	return sent, nil
}

// end tells the client why the hub let subscription id go, and where to
// resume: a slow client is disconnected, a closing relay goes away.
func (c *conn) end(me *sub, s *stream.Subscription, pos int64) {
	id := me.id
	select {
	case <-s.Gone():
	default: // a failed log read: the subscription ends, the connection stays
		c.dropSub(me)
		c.closed(id, protocol.Errorf(stream.CodeUnavailable, "log unavailable; REQ again with after=%d", pos))
		return
	}
	if s.Slow() {
		c.closed(id, protocol.Errorf(CodeTooSlow, "too slow; reconnect and REQ with after=%d", pos))
		c.shut(websocket.StatusPolicyViolation, "too slow")
		return
	}
	c.closed(id, protocol.Errorf(stream.CodeUnavailable, "relay shutting down; reconnect and REQ with after=%d", pos))
	c.shut(websocket.StatusGoingAway, "relay shutting down")
}

// subWriter frames one subscription's events.
type subWriter struct {
	c      *conn
	prefix []byte
	buf    []byte
	corked bool
}

// event sends ["EVENT", sub_id, event, seq] (seq omitted when 0: a stored
// match found by query, whose sequence is not read).
func (w *subWriter) event(seq int64, body []byte) bool {
	w.buf = append(w.buf[:0], w.prefix...)
	w.buf = append(w.buf, body...)
	if seq > 0 {
		w.buf = append(w.buf, ',')
		w.buf = strconv.AppendInt(w.buf, seq, 10)
	}
	w.buf = append(w.buf, ']')
	if !w.corked {
		return w.c.send(w.buf)
	}
	// Corked, the write only fills memory: no deadline to arm (the
	// uncork's write has one). It still fails at once on a closed
	// connection.
	if err := w.c.ws.Write(context.Background(), websocket.MessageText, w.c.frame(w.buf)); err != nil {
		w.c.shut(websocket.StatusPolicyViolation, "write failed")
		return false
	}
	return true
}

// cork gathers the following events into one write, until uncork.
func (w *subWriter) cork() {
	w.c.cc.cork()
	w.corked = true
}

// uncork sends what cork gathered, closing the connection when the
// client does not take it within WriteTimeout.
func (w *subWriter) uncork() bool {
	w.corked = false
	if err := w.c.cc.uncork(w.c.m.opts.WriteTimeout); err != nil {
		w.c.shut(websocket.StatusPolicyViolation, "write failed or timed out")
		return false
	}
	return true
}

// allowReq counts one REQ against MaxReqsPerMinute (a fixed window on the
// relay clock): each REQ without after runs a query, so a client may not
// loop them. Called from the read loop only.
func (c *conn) allowReq() bool {
	w := c.m.core.Config().Now().Unix() / 60
	if w != c.reqWindow {
		c.reqWindow, c.reqs = w, 0
	}
	if c.reqs >= c.m.opts.MaxReqsPerMinute {
		return false
	}
	c.reqs++
	return true
}
