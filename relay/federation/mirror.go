package federation

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/reconcile"
)

// MirrorResult reports one reconciliation with a peer.
type MirrorResult struct {
	Peer      string `json:"peer"`
	Rounds    int    `json:"rounds"`
	BytesSent int    `json:"bytes_sent"`
	BytesRecv int    `json:"bytes_received"`
	Need      int    `json:"need"`
	Have      int    `json:"have"`
	Fetched   int    `json:"fetched"`
	Accepted  int    `json:"accepted"`
	Rejected  int    `json:"rejected"`
	Pushed    int    `json:"pushed"`
	// Mode is "paged" when the peer serves no POST /sync and was read
	// by pages of GET /events (SPEC §6.3).
	Mode string `json:"mode,omitempty"`
	// Phase names a step that is not counted in events: "bulk load"
	// while a catch-up appends with the indexes dropped, then each index
	// being rebuilt.
	Phase string `json:"phase,omitempty"`
}

// mirrorChunk is how many ids one fetch or push carries.
const mirrorChunk = 500

// MirrorOnce reconciles this relay's log with the peer at base (POST /sync),
// fetches every event it lacks (verified as mirrored events, in parallel,
// appended in group commits) and pushes every event the peer lacks
// (POST /gossip). progress, when set, is called after each step.
func (s *Module) MirrorOnce(ctx context.Context, base string, progress func(MirrorResult)) (MirrorResult, error) {
	base = strings.TrimRight(base, "/")
	res := MirrorResult{Peer: base}
	err := s.mirrorOnce(ctx, base, &res, progress)
	now := s.now()
	s.peers.update(base, "outbound", func(p *peerStats) {
		p.LastContactAt = now
		p.Received += int64(res.Fetched)
		p.Accepted += int64(res.Accepted)
		p.Invalid += int64(res.Rejected)
		p.Pushed += int64(res.Pushed)
		p.State, p.LastError = "synced", ""
		if err != nil {
			p.State, p.LastError = "error", err.Error()
		}
	})
	return res, err
}

func (s *Module) mirrorOnce(ctx context.Context, base string, res *MirrorResult, progress func(MirrorResult)) error {
	if _, ok := s.paged.get(base); ok {
		return s.mirrorPaged(ctx, base, res, progress)
	}
	err := s.mirrorSynced(ctx, base, res, progress)
	if unsupported(err) {
		// Another implementation: no /sync, /export or ?ids=.
		s.cfg.Logger.Info("peer serves no POST /sync: mirroring it by pages of GET /events", "peer", base)
		*res = MirrorResult{Peer: base}
		s.paged.set(base, pagedPeer{})
		return s.mirrorPaged(ctx, base, res, progress)
	}
	return err
}

// mirrorSynced is a mirror round with a peer of this implementation:
// reconciliation (POST /sync), fetches by id, pushes by POST /gossip.
func (s *Module) mirrorSynced(ctx context.Context, base string, res *MirrorResult, progress func(MirrorResult)) error {
	if s.wholeExportFirst(ctx, base, res) {
		// Reconciling first would only list, round by round, nearly
		// every event of the peer; its export carries them in one stream.
		// The reconciliation after it finds what the export missed.
		if err := s.fetchAll(ctx, base, nil, true, res, progress); err != nil {
			return err
		}
	}
	sess := reconcile.NewSession(s.core.Index())
	var need, have [][32]byte
	for msg := sess.Initiate(); msg != nil; {
		reply, err := s.peerPost(ctx, base+"/sync", ContentTypeSync, msg, reconcile.MaxMessageSize)
		if err != nil {
			return fmt.Errorf("sync with %s: %w", base, err)
		}
		res.Rounds++
		res.BytesSent += len(msg)
		res.BytesRecv += len(reply)
		var h, n [][32]byte
		if msg, h, n, err = sess.Reconcile(reply); err != nil {
			return fmt.Errorf("sync with %s: %w", base, err)
		}
		have, need = append(have, h...), append(need, n...)
	}
	need = notWithheld(s.core, need)
	res.Need, res.Have = res.Need+len(need), len(have)
	report(progress, res)
	if err := s.fetchAll(ctx, base, need, false, res, progress); err != nil {
		return err
	}
	for i := 0; i < len(have); i += mirrorChunk {
		n, err := s.pushEvents(ctx, base, have[i:min(len(have), i+mirrorChunk)])
		if err != nil {
			return err
		}
		res.Pushed += n
		report(progress, res)
	}
	return nil
}

func report(progress func(MirrorResult), res *MirrorResult) {
	if progress != nil {
		progress(*res)
	}
}

// fetchEvents reads events by id from the peer, revoked and hidden ones
// and every branch's included (the relay authenticates with its own key,
// D4).
func (s *Module) fetchEvents(ctx context.Context, base string, ids [][32]byte) ([]*protocol.Event, error) {
	hexIDs := make([]string, len(ids))
	for i, id := range ids {
		hexIDs[i] = hex.EncodeToString(id[:])
	}
	url := base + "/events?branch=all&include_revoked=true&include_hidden=true&limit=1000&ids=" + strings.Join(hexIDs, ",")
	body, err := s.peerGet(ctx, url, maxPageBytes)
	if err != nil {
		return nil, fmt.Errorf("fetch from %s: %w", base, err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(body, &items); err != nil {
		return nil, fmt.Errorf("fetch from %s: %w", base, err)
	}
	out := make([]*protocol.Event, 0, len(items))
	for _, it := range items {
		if len(it) > MaxPeerLine {
			return nil, fmt.Errorf("fetch from %s: %w", base, &capError{fmt.Sprintf("an event longer than %d bytes", MaxPeerLine)})
		}
		if e, err := protocol.DecodeJSON(it); err == nil {
			out = append(out, e)
		}
	}
	return out, nil
}

// pushEvents sends stored events to the peer's POST /gossip.
func (s *Module) pushEvents(ctx context.Context, base string, ids [][32]byte) (int, error) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	n := 0
	for _, id := range ids {
		st, err := s.core.Log().Get(ctx, hex.EncodeToString(id[:]))
		if errors.Is(err, eventlog.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(st.Body)
		n++
	}
	buf.WriteByte(']')
	body, err := s.peerPost(ctx, base+"/gossip", "application/json", buf.Bytes(), maxSmallAnswer)
	if err != nil {
		return 0, fmt.Errorf("push to %s: %w", base, err)
	}
	var ans gossipAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		return 0, fmt.Errorf("push to %s: %w", base, err)
	}
	return ans.Accepted + ans.Duplicate, nil
}

// bulkMin is the smallest catch-up that loads in bulk mode (see
// eventlog.Log.BeginBulk); a catch-up must also be at least as large as the
// log, since the indexes are then rebuilt over all of it.
var bulkMin = 20000

// A bulk load drops the log's secondary indexes, so every filtered read
// scans until it ends: a peer must not be able to hold it open. It starts
// only once the catch-up has received and verified bulkMin events, and
// as many as the log held when the catch-up began (bytes actually
// received, never a peer's claim); it ends, and the indexes are rebuilt, when a
// group of bulkGroup events takes longer than bulkStall to arrive or the
// load passes bulkDeadline. Variables so that tests can shorten them.
var (
	bulkStall    = 30 * time.Second
	bulkDeadline = 30 * time.Minute
)

var (
	errBulkStalled  = errors.New("bulk load stalled: the peer sent no full group of events in time")
	errBulkDeadline = errors.New("bulk load passed its deadline")
)

// wholeExportFirst reports whether a catch-up from base should start by
// reading the peer's whole export: when the peer's /health counts enough
// more events than this relay holds that the catch-up is at least bulkMin
// and at least as large as this log. It sets res.Need to that estimate.
// The count is only a hint of what to read first: bulk mode waits for
// events actually received (fetchAll). A peer whose /health does not
// answer so is reconciled with first.
func (s *Module) wholeExportFirst(ctx context.Context, base string, res *MirrorResult) bool {
	b, err := s.peerGet(ctx, base+"/health", maxSmallAnswer)
	if err != nil {
		return false
	}
	var h struct {
		Events int `json:"events"`
	}
	if json.Unmarshal(b, &h) != nil {
		return false
	}
	local := s.core.Index().Len()
	if more := h.Events - local; more >= bulkMin && more >= local {
		res.Need = more
		return true
	}
	return false
}

// fetchAll fetches, verifies and appends in three stages that overlap, so
// the network, the cores and the single writer work at once. With whole
// set it reads the peer's whole export and keeps the events this relay
// lacks (see wholeExportFirst); otherwise it fetches need, and a need
// larger than the log itself reads the peer's export for those ids. Such
// a large catch-up switches to bulk-load mode once it has stored as many
// events as bulk mode requires (see bulkStall), and then appends in
// groups of bulkGroup.
func (s *Module) fetchAll(ctx context.Context, base string, need [][32]byte, whole bool, res *MirrorResult, progress func(MirrorResult)) (err error) {
	const bulkGroup = 8192
	type chunk struct {
		evs             []*protocol.Event
		recs            []eventlog.Record
		fetched, reject int
		err             error
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	local := s.core.Index().Len()
	large := whole || len(need) >= bulkMin && len(need) >= local
	bulkAfter, received := max(bulkMin, local), 0 // verified events, before bulk mode
	bulk := false
	var bulkOn atomic.Bool // bulk, for the verifiers
	var stall, deadline *time.Timer
	beginBulk := func() error {
		if err := s.core.Log().BeginBulk(ctx); err != nil {
			return err
		}
		bulk, res.Phase = true, "bulk load"
		bulkOn.Store(true)
		stall = time.AfterFunc(bulkStall, func() { cancel(errBulkStalled) })
		deadline = time.AfterFunc(bulkDeadline, func() { cancel(errBulkDeadline) })
		return nil
	}
	defer func() {
		if err != nil && ctx.Err() != nil {
			if c := context.Cause(ctx); c == errBulkStalled || c == errBulkDeadline {
				err = fmt.Errorf("catch-up from %s: %w", base, c)
			}
		}
		if !bulk {
			return
		}
		stall.Stop()
		deadline.Stop()
		if err := s.core.Log().EndBulk(func(step string) {
			res.Phase = step
			report(progress, res)
		}); err != nil {
			// Reads stay correct without the indexes; the next
			// start builds them.
			s.cfg.Logger.Error("rebuilding indexes after a bulk catch-up", "err", err)
		}
		res.Phase = ""
	}()
	// The verifiers may run ahead of the writer by two bulk groups.
	fetched, verified := make(chan chunk, 2), make(chan chunk, 2*bulkGroup/mirrorChunk)
	const verifyGroup = 2 * bulkGroup
	if large {
		verified = make(chan chunk, 2) // each chunk is a group
		// The reader decodes the next verify group while this one is
		// verified, instead of stopping two chunks ahead.
		fetched = make(chan chunk, verifyGroup/mirrorChunk+1)
	}
	go func() {
		defer close(fetched)
		send := func(evs []*protocol.Event, err error) bool {
			select {
			case fetched <- chunk{evs: evs, err: err}:
				return err == nil
			case <-ctx.Done():
				return false
			}
		}
		if whole {
			if n, err := s.exportMissing(ctx, base, func(evs []*protocol.Event) bool { return send(evs, nil) }); err != nil {
				send(nil, err)
			} else {
				res.Need = n
			}
			return
		}
		rest := need
		if large {
			// Reading the peer's log in order costs it a sequential scan
			// instead of a million lookups by id.
			var err error
			if rest, err = s.exportNeeded(ctx, base, need, func(evs []*protocol.Event) bool { return send(evs, nil) }); err != nil {
				send(nil, err)
				return
			}
		}
		for i := 0; i < len(rest) && ctx.Err() == nil; i += mirrorChunk {
			if !send(s.fetchEvents(ctx, base, rest[i:min(len(rest), i+mirrorChunk)])) {
				return
			}
		}
	}()
	go func() {
		defer close(verified)
		// A bulk load verifies verifyGroup events at a time: grouped by
		// author, an author's key table is read from memory once for
		// several signatures instead of once each (with 2,000 authors,
		// runs of about eight; BenchmarkVerify/2000-keys-batch64).
		// Before bulk mode begins, chunk by chunk: what is not appended
		// does not count towards it.
		group := func() int {
			if bulkOn.Load() {
				return verifyGroup
			}
			return 1
		}
		send := func(ch chunk) bool {
			select {
			case verified <- ch:
				return true
			case <-ctx.Done():
				return false
			}
		}
		var pending []*protocol.Event
		flush := func() bool {
			if len(pending) == 0 {
				return true
			}
			ch := chunk{fetched: len(pending)}
			ch.recs, ch.reject = s.core.VerifyMirrored(pending)
			pending = nil
			return send(ch)
		}
		for ch := range fetched {
			if ch.err != nil {
				if flush() {
					send(ch)
				}
				return
			}
			if pending = append(pending, ch.evs...); len(pending) >= group() && !flush() {
				return
			}
		}
		flush()
	}()
	// Two groups are in flight: an append returns only once the commit
	// hook has folded its events, and with one the writer would sit idle
	// while it did.
	type flight struct {
		n    int
		done chan error
	}
	var inflight *flight
	finish := func() error {
		if inflight == nil {
			return nil
		}
		f := inflight
		inflight = nil
		if err := <-f.done; err != nil {
			return err
		}
		res.Accepted += f.n
		if bulk {
			stall.Reset(bulkStall)
		}
		report(progress, res)
		return nil
	}
	start := func(recs []eventlog.Record) error {
		if len(recs) == 0 {
			return nil
		}
		received += len(recs)
		if large && !bulk && received >= bulkAfter {
			if err := finish(); err != nil { // the last group before bulk mode commits first
				return err
			}
			if err := beginBulk(); err != nil {
				return err
			}
		}
		f := &flight{n: len(recs), done: make(chan error, 1)}
		inBulk := bulk
		go func() { f.done <- s.core.AppendMirrored(ctx, recs, inBulk) }()
		err := finish()
		inflight = f
		return err
	}
	var recs []eventlog.Record
	for ch := range verified {
		if ch.err != nil {
			return ch.err
		}
		recs = append(recs, ch.recs...)
		res.Fetched += ch.fetched
		res.Rejected += ch.reject
		if bulk && len(recs) < bulkGroup && len(verified) < cap(verified) {
			continue // larger transactions write each touched page once
		}
		if err := start(recs); err != nil {
			return err
		}
		recs = nil
	}
	if err := start(recs); err != nil {
		return err
	}
	if err := finish(); err != nil {
		return err
	}
	return context.Cause(ctx)
}

// exportNeeded streams the peer's GET /export and passes the events whose
// ids are in need to emit, mirrorChunk at a time, until emit returns false.
// It returns the needed ids the export did not carry (committed there after
// it began, or lines that did not decode), in need's order.
func (s *Module) exportNeeded(ctx context.Context, base string, need [][32]byte, emit func([]*protocol.Event) bool) ([][32]byte, error) {
	want := make(map[[32]byte]bool, len(need))
	for _, id := range need {
		want[id] = true
	}
	chunk := make([]*protocol.Event, 0, mirrorChunk)
	err := s.readExport(ctx, base, func(line []byte) bool {
		var id [32]byte
		if hexID, _, ok := relay.BodyIDs(line); ok && decodeID(id[:], hexID) && want[id] {
			if e, err := protocol.DecodeJSON(line); err == nil {
				delete(want, id)
				chunk = append(chunk, e)
			}
		}
		if len(chunk) == mirrorChunk || len(want) == 0 && len(chunk) > 0 {
			if !emit(chunk) {
				return false
			}
			chunk = make([]*protocol.Event, 0, mirrorChunk)
		}
		return len(want) > 0 // the rest of the export is not needed
	})
	if err == nil && len(chunk) > 0 && !emit(chunk) {
		err = ctx.Err()
	}
	if err != nil || ctx.Err() != nil {
		return nil, cmp.Or(err, ctx.Err())
	}
	rest := make([][32]byte, 0, len(want))
	for _, id := range need {
		if want[id] {
			rest = append(rest, id)
		}
	}
	return rest, nil
}

// exportMissing streams the peer's GET /export and passes the events this
// relay does not hold to emit, mirrorChunk at a time, until the export
// ends or emit returns false. It returns how many it passed. A line that
// does not decode is left out: the reconciliation that follows finds the
// event missing and fetches it by id, where it is judged.
func (s *Module) exportMissing(ctx context.Context, base string, emit func([]*protocol.Event) bool) (int, error) {
	n := 0
	chunk := make([]*protocol.Event, 0, mirrorChunk)
	// A relay that held nothing when the export began holds only what
	// this export gives it (and the odd event gossiped meanwhile, which
	// the log keeps once): no event needs looking up.
	empty := s.core.Index().Len() == 0
	err := s.readExport(ctx, base, func(line []byte) bool {
		if e, err := protocol.DecodeJSON(line); err == nil && (empty || !s.core.Index().Has(relay.ItemOf(e))) {
			chunk = append(chunk, e)
		}
		if len(chunk) < mirrorChunk {
			return true
		}
		n += len(chunk)
		ok := emit(chunk)
		chunk = make([]*protocol.Event, 0, mirrorChunk)
		return ok
	})
	if err == nil && len(chunk) > 0 {
		n += len(chunk)
		if !emit(chunk) {
			err = ctx.Err()
		}
	}
	return n, err
}

// readExport calls line with each line of the peer's GET /export
// (authenticated with the relay key), until the export ends or line
// returns false. The bytes passed to line are valid only during the call.
func (s *Module) readExport(ctx context.Context, base string, line func([]byte) bool) error {
	ctx, cancel := context.WithTimeout(ctx, streamDeadline)
	defer cancel()
	resp, cancelIdle, err := s.peerSend(ctx, http.MethodGet, base+"/export", "", nil, peerIdle)
	if err != nil {
		return fmt.Errorf("export from %s: %w", base, err)
	}
	defer cancelIdle(nil)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := readCapped(resp.Body, 300, "an error")
		return &peerStatusError{Method: http.MethodGet, URL: base + "/export", Status: resp.StatusCode, Body: string(bytes.TrimSpace(b))}
	}
	if err := eachLine(resp.Body, MaxPeerLine, line); err != nil {
		if err == errStopped {
			return ctx.Err()
		}
		return fmt.Errorf("export from %s: %w", base, peerReadError(ctx, err))
	}
	return nil
}

var errStopped = errors.New("stopped")

// plainToLoopback asks a peer on this machine for uncompressed answers:
// there compression only costs both processes CPU. Elsewhere the
// transport negotiates gzip and decompresses transparently.
func plainToLoopback(req *http.Request) {
	h := req.URL.Hostname()
	if ip := net.ParseIP(h); h == "localhost" || ip != nil && ip.IsLoopback() {
		req.Header.Set("Accept-Encoding", "identity")
	}
}

func decodeID(dst []byte, h string) bool {
	n, err := hex.Decode(dst, []byte(h))
	return err == nil && n == len(dst)
}

// peerGet reads url from a peer, an answer of at most limit bytes.
func (s *Module) peerGet(ctx context.Context, url string, limit int64) ([]byte, error) {
	return s.peerDo(ctx, http.MethodGet, url, "", nil, limit)
}

func (s *Module) peerPost(ctx context.Context, url, ct string, body []byte, limit int64) ([]byte, error) {
	return s.peerDo(ctx, http.MethodPost, url, ct, body, limit)
}

// peerDo sends one request to a peer, authenticated with the relay key,
// within peerDeadline and peerIdle, and reads an answer of at most limit
// bytes (a longer one is a capError).
func (s *Module) peerDo(ctx context.Context, method, url, ct string, body []byte, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, peerDeadline)
	defer cancel()
	resp, cancelIdle, err := s.peerSend(ctx, method, url, ct, body, peerIdle)
	if err != nil {
		return nil, err
	}
	defer cancelIdle(nil)
	defer resp.Body.Close()
	b, err := readCapped(resp.Body, limit, method+" "+url)
	if err != nil {
		return nil, peerReadError(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &peerStatusError{Method: method, URL: url, Status: resp.StatusCode, Body: string(bytes.TrimSpace(b[:min(len(b), 300)]))}
	}
	return b, nil
}

// peerSend sends one request to a peer, authenticated with the relay key
// (the payload tag binds the body: a peer takes a push as a peer's only
// when the header does, gossipPeer), and returns the answer with its body
// watched for idle (no byte for idle ends the request); the caller closes
// the body and calls the returned cancel.
func (s *Module) peerSend(ctx context.Context, method, url, ct string, body []byte, idle time.Duration) (*http.Response, context.CancelCauseFunc, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		cancel(nil)
		return nil, nil, err
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	plainToLoopback(req)
	if s.cfg.RelayKey != nil {
		req.Header.Set("Authorization", protocol.HTTPAuth(s.cfg.RelayKey, method, url, body, s.now()))
	}
	resp, err := s.peerClient.Do(req)
	if err != nil {
		cancel(nil)
		return nil, nil, err
	}
	resp.Body = watchIdle(resp.Body, idle, cancel)
	return resp, cancel, nil
}

// peerReadError names why reading an answer failed: the idle timeout or
// the deadline when one ended it.
func peerReadError(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !isCapError(err) {
		return fmt.Errorf("%w (%v)", err, cause)
	}
	return err
}

// errRevoked stops a round with a relay governance revoked.
var errRevoked = errors.New("relay revoked by governance (revoke_relay)")

// keyOf returns the relay key learned for the peer at base, or "".
func (s *Module) keyOf(base string) string {
	key := ""
	s.peerKeys.Range(func(k, v any) bool {
		if v == "peer "+base {
			key = k.(string)
			return false
		}
		return true
	})
	return key
}

// MirrorLoop keeps this relay mirrored with the peer at base until ctx
// ends: it reconciles, then follows the peer's event stream (pull, within
// moments) while reconciling again every MirrorInterval (which pushes what
// the peer lacks and repairs anything the stream missed); a broken stream
// or a failed reconciliation starts over, with backoff.
func (s *Module) MirrorLoop(ctx context.Context, base string) {
	backoff := time.Second
	base = strings.TrimRight(base, "/")
	for ctx.Err() == nil {
		var err error
		if s.revoked(base) || s.revoked(s.keyOf(base)) {
			// A relay governance revoked is not mirrored; look again later.
			s.peers.update(base, "outbound", func(p *peerStats) { p.State, p.LastError = "revoked", "revoked by governance" })
			err = errRevoked
		} else {
			err = s.mirrorRound(ctx, base)
		}
		// A round that ends without an error (the peer closed its stream)
		// starts again after the mirror interval, so a peer that closes
		// at once cannot spin the loop.
		wait := s.opts.MirrorInterval
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("mirror", "peer", base, "err", err)
			wait, backoff = backoff, min(2*backoff, time.Minute)
			if isCapError(err) {
				// A broken cap is not a hiccup: leave the peer alone.
				wait = max(wait, capBackoff)
				s.capped.add(base, time.Now().Add(wait))
			}
			s.peers.update(base, "outbound", func(p *peerStats) { p.State, p.LastError = "error", err.Error() })
		} else {
			backoff = time.Second
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// mirrorRound reconciles, then follows the stream until it breaks,
// reconciling on every tick meanwhile.
func (s *Module) mirrorRound(ctx context.Context, base string) error {
	// The peer's log position before reconciling: the stream resumes
	// there, so nothing committed during the reconciliation is missed.
	after, err := s.peerSeq(ctx, base)
	if err != nil {
		return err
	}
	s.learnPeerKey(ctx, base)
	if _, err := s.MirrorOnce(ctx, base, nil); err != nil {
		return err
	}
	if _, paged := s.paged.get(base); paged {
		return s.pollPaged(ctx, base)
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.follow(fctx, base, after) }()
	tick := time.NewTicker(s.opts.MirrorInterval)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if _, err := s.MirrorOnce(ctx, base, nil); err != nil {
				return err
			}
		}
	}
}

// pollPaged mirrors a paged peer again every MirrorInterval: another
// implementation's stream cannot be resumed (SPEC §6.3).
func (s *Module) pollPaged(ctx context.Context, base string) error {
	tick := time.NewTicker(s.opts.MirrorInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if _, err := s.MirrorOnce(ctx, base, nil); err != nil {
				return err
			}
		}
	}
}

// peerSeq reads the peer's highest log sequence from its /health.
func (s *Module) peerSeq(ctx context.Context, base string) (int64, error) {
	b, err := s.peerGet(ctx, base+"/health", maxSmallAnswer)
	if err != nil {
		return 0, err
	}
	var h struct {
		MaxSeq int64 `json:"max_seq"`
	}
	err = json.Unmarshal(b, &h)
	return h.MaxSeq, err
}

// follow reads the peer's GET /stream from after and stores each event as
// a mirrored event, until the stream ends (the caller then reconciles
// again). Events this relay pushed come back as duplicates and cost one
// lookup.
func (s *Module) follow(ctx context.Context, base string, after int64) error {
	ctx, cancel := context.WithTimeout(ctx, streamDeadline)
	defer cancel()
	url := base + "/stream"
	ctx, cancelIdle := context.WithCancelCause(ctx)
	defer cancelIdle(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	plainToLoopback(req)
	if s.cfg.RelayKey != nil {
		req.Header.Set("Authorization", protocol.HTTPAuth(s.cfg.RelayKey, http.MethodGet, url, nil, s.now()))
	}
	resp, err := s.peerClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body = watchIdle(resp.Body, peerIdle, cancelIdle)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	err = eachLine(resp.Body, MaxPeerLine, func(line []byte) bool {
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			return true
		}
		e, err := protocol.DecodeJSON(bytes.TrimSpace(data))
		if err != nil {
			return true // a meta notice or a foreign frame
		}
		acc, rej, err := s.core.IngestMirrored(ctx, []*protocol.Event{e})
		if err != nil {
			return false
		}
		s.peers.update(base, "outbound", func(p *peerStats) {
			p.LastContactAt, p.State = s.now(), "following"
			p.Received++
			p.Accepted += int64(acc)
			p.Invalid += int64(rej)
		})
		return true
	})
	switch {
	case err == errStopped:
		return cmp.Or(ctx.Err(), errors.New("storing a streamed event failed"))
	case err != nil && ctx.Err() == nil:
		return fmt.Errorf("stream from %s: %w", base, err)
	case err != nil && context.Cause(ctx) != ctx.Err():
		return fmt.Errorf("stream from %s: %w (%v)", base, err, context.Cause(ctx))
	}
	return nil
}

// notWithheld drops from ids the events this relay withholds (SPEC
// §21.8): they are left out of its index, so a peer that holds one lists
// it as needed every round; fetching it again would only be refused.
func notWithheld(core *relay.Server, ids [][32]byte) [][32]byte {
	out := ids[:0]
	for _, id := range ids {
		if _, ok := core.State().Withheld(hex.EncodeToString(id[:])); !ok {
			out = append(out, id)
		}
	}
	return out
}
