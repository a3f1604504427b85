package relay

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/protocol/canonjson"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/labstack/echo/v4"
)

// PublishAnswer is the body of a successful publish (POST /events, and
// each accepted event of a batch).
type PublishAnswer struct {
	ID        string `json:"id"`
	Accepted  bool   `json:"accepted"`
	Duplicate bool   `json:"duplicate"`
	Stored    bool   `json:"stored"`
	// Warnings name every departure from the seed's shape the relay
	// accepted and normalised (D17, SPEC §1.3); absent when none.
	Warnings []protocol.Warning `json:"warnings,omitempty"`
	// LeafIndex is the event's entry in the log's Merkle tree (its seq
	// minus one, SPEC §21), given when the publish stored it anew.
	LeafIndex *int64 `json:"leaf_index,omitempty"`
}

// readEvent decodes the request body as JSON or, with
// Content-Type application/anp+cbor, as deterministic CBOR.
func (s *Server) readEvent(c echo.Context) (*protocol.Event, []byte, string, error) {
	body, err := s.readBody(c)
	if err != nil {
		return nil, nil, "", err
	}
	ct := c.Request().Header.Get(echo.HeaderContentType)
	switch mediaType(ct) {
	case protocol.ContentTypeCBOR:
		e, err := protocol.DecodeCBOR(body)
		return e, body, "cbor", err
	case "", "application/json", "application/anp+json", "text/plain":
		e, err := protocol.DecodeJSON(body)
		return e, body, "json", err
	}
	return nil, nil, "", protocol.Errorf(CodeUnsupportedType, "unsupported Content-Type %q: send application/json or %s", ct, protocol.ContentTypeCBOR)
}

// mediaType is the media type of the Content-Type ct, lower case, without
// parameters ("" when ct is empty or malformed), as mime.ParseMediaType
// finds it; the plain "application/json" most clients send is answered
// without parsing.
func mediaType(ct string) string {
	if ct == "application/json" || ct == "" {
		return ct
	}
	mt, _, _ := mime.ParseMediaType(ct)
	return mt
}

// defaultBodyTimeout is Config.BodyTimeout's default.
const defaultBodyTimeout = 30 * time.Second

// readBody reads a publish body within the body timeout (Config.BodyTimeout,
// a read deadline on this request's connection only, so streams and other
// routes are unaffected) and maps its failures to their codes:
// body_too_large (413), body_timeout (408), invalid_parameter.
func (s *Server) readBody(c echo.Context) ([]byte, error) {
	return readBodyWithin(c, s.cfg.BodyTimeout)
}

// readBodyWithin is readBody with the body timeout d (0: the default). A
// body readBodies already read is returned as it is.
func readBodyWithin(c echo.Context, d time.Duration) ([]byte, error) {
	if b, ok := bodyRead(c.Request()); ok {
		return b, nil
	}
	if d == 0 {
		d = defaultBodyTimeout
	}
	var rc *http.ResponseController
	if d > 0 {
		rc = http.NewResponseController(c.Response())
		if rc.SetReadDeadline(time.Now().Add(d)) != nil {
			rc = nil // not a connection that takes deadlines (tests' recorders)
		}
	}
	body, err := readBody(c.Request())
	if err != nil {
		// What is left of the body is not worth waiting for: the server
		// would drain it after the answer (with no deadline, for as long
		// as the client trickles it). An expired deadline ends that drain
		// at once, and the connection is closed after the answer.
		if rc != nil {
			_ = rc.SetReadDeadline(time.Now())
		}
		c.Response().Header().Set(echo.HeaderConnection, "close")
	} else if rc != nil {
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) || errors.Is(err, echo.ErrStatusRequestEntityTooLarge) {
			return nil, protocol.Errorf(CodeBodyTooLarge, "request body too large")
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, protocol.Errorf(CodeBodyTimeout, "request body not received within %s", d)
		}
		return nil, protocol.Errorf(CodeBadParameter, "cannot read body: %v", err)
	}
	return body, nil
}

// bodyChunk is the most readBody allocates before the bytes arrive.
const bodyChunk = 64 << 10

// readBody reads r's body into one buffer sized by its Content-Length
// when it declares one, up to bodyChunk: past that the buffer grows only
// as bytes actually arrive (doubling, but never beyond the declared
// length until the body proves longer), so a client declaring 1 MiB and
// sending one byte holds 64 KiB, not 1 MiB. The body limit still
// applies; a body longer than it declares is read on.
func readBody(r *http.Request) ([]byte, error) {
	n := r.ContentLength
	if n <= 0 {
		return io.ReadAll(r.Body)
	}
	buf := make([]byte, 0, min(n+1, bodyChunk))
	for {
		if len(buf) == cap(buf) {
			c := 2 * int64(cap(buf))
			if int64(len(buf)) <= n && c > n+1 {
				c = n + 1
			}
			nb := make([]byte, len(buf), c)
			copy(nb, buf)
			buf = nb
		}
		m, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			if int64(len(buf)) < n {
				return buf, io.ErrUnexpectedEOF
			}
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// writeAnswer writes ans exactly as c.JSON would (the same bytes, a
// newline after), without reflection; ?pretty and other parameters go
// through c.JSON.
func writeAnswer(c echo.Context, ans *PublishAnswer) error {
	if c.Request().URL.RawQuery != "" || len(ans.Warnings) > 0 {
		return c.JSON(http.StatusOK, ans)
	}
	b := make([]byte, 0, 128)
	b = append(b, `{"id":`...)
	b = canonjson.AppendString(b, ans.ID)
	b = append(b, `,"accepted":`...)
	b = strconv.AppendBool(b, ans.Accepted)
	b = append(b, `,"duplicate":`...)
	b = strconv.AppendBool(b, ans.Duplicate)
	b = append(b, `,"stored":`...)
	b = strconv.AppendBool(b, ans.Stored)
	if ans.LeafIndex != nil {
		b = append(b, `,"leaf_index":`...)
		b = strconv.AppendInt(b, *ans.LeafIndex, 10)
	}
	b = append(b, "}\n"...)
	if len(b) < compressMinLength { // always: the id is 64 characters
		uncompressed(c)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b)
}

func (s *Server) postEvent(c echo.Context) error {
	start := time.Now()
	e, raw, rawType, err := s.readEvent(c)
	if err != nil {
		return s.reject(err)
	}
	// The log's writer is told of the publish once its body is read (not
	// from its first byte: a slow or stalled body must not hold every
	// transaction for the gathering window), so that a transaction under
	// way waits for it while it is checked (see announce).
	withdraw := s.announce()
	defer withdraw()
	ans, err := s.ingest(c.Request().Context(), e, raw, rawType, c.RealIP(), true, withdraw)
	if err != nil {
		return s.reject(err)
	}
	s.metrics.observe(time.Since(start))
	// Most answers carry no module field: answerPublish writes those
	// without reflection (writeAnswer).
	return s.answerPublish(c, e, ans)
}

// reject counts err under its code and passes it to the error handler.
func (s *Server) reject(err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		s.metrics.rejected(pe.Code)
	}
	return err
}

// ingest applies every publish rule, in the documented order, and appends
// e. It answers only after the event is committed. (Events from peers go
// through CheckMirrored instead.)
// withdraw ends the publish's announcement (see announce) just before
// its append is queued. owned says raw is handed over (see prepare).
func (s *Server) ingest(ctx context.Context, e *protocol.Event, raw []byte, rawType, ip string, owned bool, withdraw func()) (*PublishAnswer, error) {
	now := s.cfg.Now()
	rec, ans, err := s.prepare(ctx, e, raw, rawType, ip, now, owned)
	withdraw()
	if rec == nil {
		return ans, err
	}
	res, err := s.store.Append(ctx, *rec)
	if err != nil {
		return nil, err
	}
	out := s.stored(e, res)
	if ans != nil && !out.Duplicate {
		out.Warnings = ans.Warnings
	}
	return out, nil
}

// expecter is a log whose writer can wait for appends on their way
// (sqlite.Store.Expect).
type expecter interface{ Expect(n int) }

// announce tells the log's writer, when it can wait for appends on their
// way, that a publish (its body read) is being checked, and returns the function
// that withdraws the announcement (once; later calls do nothing): called
// just before the append is queued, or when the publish is turned away.
// Under concurrent publishing a transaction then takes every publish that
// had arrived when it began instead of the few already checked, and they
// share its commit: the WAL pages and the fsync of a transaction cost
// about the same for 1 event as for 30.
func (s *Server) announce() func() {
	ex, ok := s.store.(expecter)
	if !ok {
		return func() {}
	}
	ex.Expect(1)
	done := false
	return func() {
		if !done {
			done = true
			ex.Expect(-1)
		}
	}
}

// prepare applies every publish rule to e, in the documented order,
// charging the address and then the agent. It returns the record to
// append, or an answer that needs no append (a stored duplicate, a kind 11
// beat handed to its modules), or the first violation. With a record it
// may also return an answer that carries only the event's warnings. owned says raw
// is this publish's alone, never changed or reused after (a POST /events
// body): the record may then keep raw itself as its body
// (eventlog.NewRecordOwning) instead of a copy.
func (s *Server) prepare(ctx context.Context, e *protocol.Event, raw []byte, rawType, ip string, now time.Time, owned bool) (*eventlog.Record, *PublishAnswer, error) {
	if errs := s.cfg.Checker.Limits.Check(e, now.Unix()); len(errs) > 0 {
		return nil, nil, errs[0]
	}
	if err := e.CheckID(); err != nil {
		return nil, nil, err
	}
	// A stored event with the same id and signature is a duplicate: answer
	// without verifying or charging it again.
	if dup, err := s.storedCopy(ctx, e); err != nil {
		return nil, nil, err
	} else if dup {
		s.metrics.duplicates.Add(1)
		return nil, &PublishAnswer{ID: e.ID, Accepted: true, Duplicate: true, Stored: true}, nil
	}
	// The address pays for the signature check before it is made, valid or
	// not, so junk signatures cost their sender's allowance, not our CPU.
	// The agent is charged only once the signature proves it sent the event
	// (otherwise anyone could spend a victim's allowance).
	if err := s.chargeIP(ip, now); err != nil {
		return nil, nil, err
	}
	admit, err := s.checkAfterID(e, now)
	if err != nil {
		return nil, nil, err
	}
	logWarns, err := s.checkAgainstLog(ctx, e)
	if err != nil {
		return nil, nil, err
	}
	if err := s.chargeAgent(e, now); err != nil {
		return nil, nil, err
	}
	for _, gate := range s.gates {
		if err := gate(ctx, e, now); err != nil {
			return nil, nil, err
		}
	}
	if e.Kind == protocol.KindHealth {
		// Kind 11 beats are verified and rate-limited but never stored (D11):
		// they only feed the modules that asked for them (liveness).
		for _, h := range s.ephemeral[e.Kind] {
			h(e, now.Unix())
		}
		return nil, &PublishAnswer{ID: e.ID, Accepted: true, Warnings: s.warnings(e, now.Unix(), logWarns)}, nil
	}
	var rec eventlog.Record
	if owned {
		rec = eventlog.NewRecordOwning(e, raw, rawType, now.Unix())
	} else {
		rec = eventlog.NewRecord(e, raw, rawType, now.Unix())
	}
	rec.Admit = admit
	if w := s.warnings(e, now.Unix(), logWarns); len(w) > 0 {
		return &rec, &PublishAnswer{ID: e.ID, Accepted: true, Stored: true, Warnings: w}, nil
	}
	return &rec, nil, nil
}

// stored counts an appended event and answers its publisher.
func (s *Server) stored(e *protocol.Event, res eventlog.Result) *PublishAnswer {
	s.CountStored([]eventlog.Result{res})
	ans := &PublishAnswer{ID: e.ID, Accepted: true, Duplicate: res.Duplicate, Stored: true}
	if !res.Duplicate && res.Seq > 0 {
		leaf := res.Seq - 1
		ans.LeafIndex = &leaf
	}
	return ans
}

// checkAgainstLog applies the rules that need the log (see logViolations)
// and returns the first violation, or the warnings.
func (s *Server) checkAgainstLog(ctx context.Context, e *protocol.Event) ([]protocol.Warning, error) {
	errs, warns, err := s.logViolations(ctx, e)
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return warns, nil
}

// logViolations returns every violation of the rules that need the log,
// and the warnings: a revoke may only name the revoker's own events, and a
// kind 51 quote must stay within the bounds of its stored request in the
// quote's currency (§18.4, protocol.AcceptPrice; a quote no bound applies
// to is a warning).
func (s *Server) logViolations(ctx context.Context, e *protocol.Event) ([]error, []protocol.Warning, error) {
	var out []error
	var warns []protocol.Warning
	if e.Kind == protocol.KindTaskAccept {
		if root := protocol.TaskRoot(e); root != "" {
			req, err := s.store.GetEvent(ctx, root)
			switch {
			case errors.Is(err, eventlog.ErrNotFound):
				// The request may arrive later (mirrors); the fold judges then.
			case err != nil:
				return nil, nil, err
			case req.Kind == protocol.KindTaskRequest:
				w, perr := protocol.CheckAcceptPrice(e, req)
				if perr != nil {
					out = append(out, perr)
				} else if w != nil && w.Code != protocol.WarnNoQuote { // the kind rule names that one
					warns = append(warns, *w)
				}
			}
		}
	}
	if e.Kind == protocol.KindRevoke {
		for _, target := range e.TagValues("e") {
			author, err := s.store.Author(ctx, target)
			if errors.Is(err, eventlog.ErrNotFound) {
				continue // may arrive later; the revoke binds only the same author
			}
			if err != nil {
				return nil, nil, err
			}
			if author != e.AgentID {
				out = append(out, protocol.Errorf(CodeRevokeNotOwner, "cannot revoke %s: only its author may revoke an event", target))
			}
		}
	}
	return out, warns, nil
}

// chargeIP takes one unit of the address's allowance (IPv6 by its
// Config.IPv6Prefix network) (429 + Retry-After
// when it has none left). Every signature check an address asks for is
// charged, whatever its outcome.
func (s *Server) chargeIP(ip string, now time.Time) error {
	if ok, wait := s.byIP.allow(s.addrKey(ip), now, true); !ok {
		return &retryError{protocol.Errorf(CodeRateLimited, "rate limit exceeded (%d events per %s per IP)", s.cfg.RatePerIP, s.cfg.RateWindow), retrySeconds(wait)}
	}
	return nil
}

// chargeAgent takes one unit of the verified author's allowance.
func (s *Server) chargeAgent(e *protocol.Event, now time.Time) error {
	if ok, wait := s.byAgent.allow(e.AgentID, now, true); !ok {
		return &retryError{protocol.Errorf(CodeRateLimited, "rate limit exceeded (%d events per %s per agent)", s.cfg.RatePerAgent, s.cfg.RateWindow), retrySeconds(wait)}
	}
	return nil
}

// dryRunAnswer lists every violation an event has, without storing it.
type dryRunAnswer struct {
	ID         string             `json:"id"`
	Valid      bool               `json:"valid"`
	Duplicate  bool               `json:"duplicate"`
	Violations []violation        `json:"violations"`
	Warnings   []protocol.Warning `json:"warnings"`
}

type violation struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

func (s *Server) dryRun(c echo.Context) error {
	e, _, _, err := s.readEvent(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	now := s.cfg.Now()
	// A dry run verifies a signature too: it is charged like a publish.
	if err := s.chargeIP(c.RealIP(), now); err != nil {
		return s.reject(err)
	}
	errs := s.bypassDryRun(e, now, s.cfg.Checker.CheckAll(e, now.Unix()))
	logErrs, logWarns, err := s.logViolations(ctx, e)
	if err != nil {
		return err
	}
	errs = append(errs, logErrs...)
	for _, check := range s.dryChecks {
		if err := check(e, now.Unix()); err != nil {
			errs = append(errs, err)
		}
	}
	if ok, _ := s.byAgent.allow(e.AgentID, now, false); !ok {
		errs = append(errs, protocol.Errorf(CodeRateLimited, "this agent is currently rate limited"))
	}
	ans := dryRunAnswer{ID: e.ID, Violations: []violation{}, Warnings: []protocol.Warning{}}
	if len(errs) == 0 {
		ans.Warnings = append(ans.Warnings, s.warnings(e, now.Unix(), logWarns)...)
	}
	for _, err := range errs {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			ans.Violations = append(ans.Violations, violation{pe.Code, pe.Detail})
		}
	}
	_, ans.Duplicate, _ = s.store.Lookup(ctx, e.ID)
	ans.Valid = len(ans.Violations) == 0
	return c.JSON(http.StatusOK, ans)
}

// storedCopy reports whether the log holds e with the same signature. The
// in-memory reconciliation index, which every commit updates before its
// publishers are answered, answers "new" for almost every publish without
// touching SQLite (whose readers start cold after each commit); only an id
// it holds is looked up, to compare signatures. An id committed but not yet
// indexed reads as new: it is then verified and the log answers it as a
// duplicate, so the answer is the same, only slower.
func (s *Server) storedCopy(ctx context.Context, e *protocol.Event) (bool, error) {
	if !s.index.Has(ItemOf(e)) {
		return false, nil
	}
	sig, found, err := s.store.Lookup(ctx, e.ID)
	return found && sig == e.Sig, err
}

// answerPublish writes a publish answer with the modules' fields for e.
func (s *Server) answerPublish(c echo.Context, e *protocol.Event, ans *PublishAnswer) error {
	if len(s.publishInfo) == 0 || !ans.Stored || ans.Duplicate {
		return writeAnswer(c, ans)
	}
	out := map[string]any{}
	for _, h := range s.publishInfo {
		for k, v := range h(e) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return writeAnswer(c, ans)
	}
	out["id"], out["accepted"], out["duplicate"], out["stored"] = ans.ID, ans.Accepted, ans.Duplicate, ans.Stored
	if len(ans.Warnings) > 0 {
		out["warnings"] = ans.Warnings
	} else {
		delete(out, "warnings")
	}
	if ans.LeafIndex != nil {
		out["leaf_index"] = *ans.LeafIndex
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, b)
}

// warnings returns every warning of an accepted publish of e: its kind
// rule's (protocol.KindWarnings), then logWarns (the rules that read the
// log), then the modules'. nil when there is none.
func (s *Server) warnings(e *protocol.Event, now int64, logWarns []protocol.Warning) []protocol.Warning {
	out := protocol.KindWarnings(e)
	out = append(out, logWarns...)
	for _, w := range s.warners {
		out = append(out, w(e, now)...)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
