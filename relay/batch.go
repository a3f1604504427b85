package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/labstack/echo/v4"
)

// MaxBatchEvents bounds one POST /events/batch (and POST /gossip) body.
const MaxBatchEvents = 1000

// ReadBatch splits a JSON array body, or a CBOR array with Content-Type
// application/anp+cbor, into its encoded items (at most MaxBatchEvents),
// and says which encoding it was. The body must arrive within the
// default body timeout (30 s, see Config.BodyTimeout).
func ReadBatch(c echo.Context) ([][]byte, string, error) { return readBatch(c, 0) }

// readBatch is ReadBatch with the body timeout d (0: the default).
func readBatch(c echo.Context, d time.Duration) ([][]byte, string, error) {
	body, err := readBodyWithin(c, d)
	if err != nil {
		return nil, "", err
	}
	mt := mediaType(c.Request().Header.Get(echo.HeaderContentType))
	var items [][]byte
	rawType := "json"
	switch mt {
	case protocol.ContentTypeCBOR:
		rawType = "cbor"
		// Major type 4 is an array; the decoder would take a null or an
		// undefined as an empty one.
		if len(body) > 0 && body[0]>>5 != 4 {
			return nil, "", protocol.Errorf(CodeBadParameter, "body must be a CBOR array of events")
		}
		if items, err = protocol.SplitCBORList(body); err != nil {
			return nil, "", err
		}
	case "", "application/json", "application/anp+json":
		var ok bool
		if items, ok = splitJSONArray(body); !ok {
			return nil, "", protocol.Errorf(CodeBadParameter, "body must be a JSON array of events")
		}
	default:
		return nil, "", protocol.Errorf(CodeUnsupportedType, "send application/json or %s", protocol.ContentTypeCBOR)
	}
	if len(items) > MaxBatchEvents {
		return nil, "", protocol.Errorf(CodeBadParameter, "at most %d events per batch", MaxBatchEvents)
	}
	return items, rawType, nil
}

// BatchResult is one event's outcome in POST /events/batch: what POST
// /events would have answered for it alone (its status, and either the
// publish answer's fields or the error's code and detail).
type BatchResult struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Status    int    `json:"status"`
	Accepted  bool   `json:"accepted"`
	Duplicate bool   `json:"duplicate"`
	Stored    bool   `json:"stored"`
	Code      string `json:"code,omitempty"`
	Detail    any    `json:"detail,omitempty"`
	// Warnings are the accepted event's warnings, as POST /events lists them.
	Warnings []protocol.Warning `json:"warnings,omitempty"`
}

// batchAnswer is the body of POST /events/batch.
type batchAnswer struct {
	Accepted  int           `json:"accepted"`
	Duplicate int           `json:"duplicate"`
	Rejected  int           `json:"rejected"`
	Results   []BatchResult `json:"results"`
}

// postBatch is POST /events/batch: up to MaxBatchEvents events from one
// client, each judged alone exactly as POST /events would judge it (same
// order of rules, same codes, each charged to the address and the agent),
// the good ones appended in one transaction, answered after it commits
// with one result per event in order.
func (s *Server) postBatch(c echo.Context) error {
	items, rawType, err := readBatch(c, s.cfg.BodyTimeout)
	if err != nil {
		return s.reject(err)
	}
	ctx, ip, now := c.Request().Context(), c.RealIP(), s.cfg.Now()
	ans := batchAnswer{Results: make([]BatchResult, len(items))}
	var recs []eventlog.Record
	var at []int // the result index of each record
	evs := make([]*protocol.Event, len(items))
	for i, raw := range items {
		r := &ans.Results[i]
		r.Index = i
		e, err := decodeItem(raw, rawType)
		var rec *eventlog.Record
		var pa *PublishAnswer
		if err == nil {
			r.ID, evs[i] = e.ID, e
			rec, pa, err = s.prepare(ctx, e, raw, rawType, ip, now, false)
		}
		switch {
		case err != nil:
			s.reject(err)
			r.Status, r.Code, r.Detail = errorStatus(err)
		case rec != nil:
			recs, at = append(recs, *rec), append(at, i)
			if pa != nil {
				r.Warnings = pa.Warnings
			}
		default:
			r.Status, r.Accepted, r.Duplicate, r.Stored, r.Warnings = http.StatusOK, pa.Accepted, pa.Duplicate, pa.Stored, pa.Warnings
		}
	}
	if len(recs) > 0 {
		results, errs, err := s.appendPublished(ctx, recs)
		if err != nil {
			return err
		}
		for k, res := range results {
			r := &ans.Results[at[k]]
			if errs[k] != nil {
				s.reject(errs[k])
				r.Status, r.Code, r.Detail = errorStatus(errs[k])
				continue
			}
			pa := s.stored(evs[at[k]], res)
			r.Status, r.Accepted, r.Duplicate, r.Stored = http.StatusOK, pa.Accepted, pa.Duplicate, pa.Stored
			if pa.Duplicate {
				r.Warnings = nil
			}
		}
	}
	for _, r := range ans.Results {
		switch {
		case r.Status != http.StatusOK:
			ans.Rejected++
		case r.Duplicate:
			ans.Duplicate++
		default:
			ans.Accepted++
		}
	}
	return writeBatchAnswer(c, &ans)
}

// splitJSONArray returns the elements of body, a JSON array, as
// sub-slices of it (each without the whitespace around it), or false when
// body is not valid JSON or not an array: "null" too, which json.Unmarshal
// would take as an empty list, is not an array (SPEC §3: 400). Otherwise it
// answers exactly as json.Unmarshal into a []json.RawMessage
// (FuzzSplitJSONArray), without copying each element.
func splitJSONArray(body []byte) ([][]byte, bool) {
	if !json.Valid(body) {
		return nil, false
	}
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 || b[0] != '[' {
		return nil, false
	}
	var items [][]byte
	depth, start, inString := 0, 1, false
	for i := 1; i < len(b); i++ {
		switch ch := b[i]; {
		case inString:
			if ch == '\\' {
				i++
			} else if ch == '"' {
				inString = false
			}
		case ch == '"':
			inString = true
		case ch == '[' || ch == '{':
			depth++
		case depth > 0 && (ch == ']' || ch == '}'):
			depth--
		case depth == 0 && (ch == ',' || ch == ']'):
			if item := bytes.Trim(b[start:i], " \t\r\n"); len(item) > 0 || ch == ',' {
				items = append(items, item)
			}
			if ch == ']' {
				return items, true
			}
			start = i + 1
		}
	}
	return nil, false // unreachable for valid JSON
}

// writeBatchAnswer writes ans exactly as c.JSON would (the same bytes,
// a newline after), without reflection for the fields it knows; ?pretty
// and other parameters go through c.JSON.
func writeBatchAnswer(c echo.Context, ans *batchAnswer) error {
	if c.Request().URL.RawQuery != "" {
		return c.JSON(http.StatusOK, ans)
	}
	b, err := appendBatchAnswer(make([]byte, 0, 64+130*len(ans.Results)), ans)
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b)
}

// appendBatchAnswer appends ans as encoding/json's Encoder writes it (a
// newline after): TestBatchAnswerEncoding compares the two.
func appendBatchAnswer(b []byte, ans *batchAnswer) ([]byte, error) {
	b = append(b, `{"accepted":`...)
	b = strconv.AppendInt(b, int64(ans.Accepted), 10)
	b = append(b, `,"duplicate":`...)
	b = strconv.AppendInt(b, int64(ans.Duplicate), 10)
	b = append(b, `,"rejected":`...)
	b = strconv.AppendInt(b, int64(ans.Rejected), 10)
	b = append(b, `,"results":`...)
	if ans.Results == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range ans.Results {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendBatchResult(b, &ans.Results[i]); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...), nil
}

func appendBatchResult(b []byte, r *BatchResult) ([]byte, error) {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(r.Index), 10)
	if r.ID != "" {
		b = append(b, `,"id":`...)
		b = appendJSONString(b, r.ID)
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	b = append(b, `,"accepted":`...)
	b = strconv.AppendBool(b, r.Accepted)
	b = append(b, `,"duplicate":`...)
	b = strconv.AppendBool(b, r.Duplicate)
	b = append(b, `,"stored":`...)
	b = strconv.AppendBool(b, r.Stored)
	if r.Code != "" {
		b = append(b, `,"code":`...)
		b = appendJSONString(b, r.Code)
	}
	switch d := r.Detail.(type) {
	case nil:
	case string: // a non-nil interface: not omitted, even when ""
		b = append(b, `,"detail":`...)
		b = appendJSONString(b, d)
	default:
		j, err := json.Marshal(d)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"detail":`...)
		b = append(b, j...)
	}
	if len(r.Warnings) > 0 {
		j, err := json.Marshal(r.Warnings)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"warnings":`...)
		b = append(b, j...)
	}
	return append(b, '}'), nil
}

// appendJSONString appends s quoted as encoding/json quotes it: plain
// ASCII directly, anything that needs escaping through json.Marshal.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, _ := json.Marshal(s)
			return append(b, j...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// decodeItem decodes one batch item in the batch's encoding.
func decodeItem(raw []byte, rawType string) (*protocol.Event, error) {
	if rawType == "cbor" {
		return protocol.DecodeCBOR(raw)
	}
	return protocol.DecodeJSON(raw)
}

// errorStatus is what the error handler would answer for err alone: its
// status, code and detail (a 422's field list as the detail).
func errorStatus(err error) (int, string, any) {
	var env *protocol.EnvelopeError
	var pe *protocol.Error
	var re *retryError
	switch {
	case errors.As(err, &env):
		return http.StatusUnprocessableEntity, "malformed_envelope", env.Fields
	case errors.As(err, &re):
		return http.StatusTooManyRequests, re.err.Code, re.err.Detail
	case errors.As(err, &pe):
		statusMu.RLock()
		st, ok := statusOf[pe.Code]
		statusMu.RUnlock()
		if !ok {
			st = http.StatusBadRequest
		}
		return st, pe.Code, pe.Detail
	}
	return http.StatusInternalServerError, "internal", "internal error"
}

// AppendMirrored stores recs; in a bulk load without an fsync per
// transaction (the peer can send them again, and EndBulk commits durably).
func (s *Server) AppendMirrored(ctx context.Context, recs []eventlog.Record, bulk bool) error {
	append := s.store.AppendBatch
	if bulk {
		append = s.store.LoadBatch
	}
	_, err := append(ctx, recs)
	return err
}

// IngestMirrored verifies events on every core as mirrored events and
// appends the valid ones in one group commit. It returns how many were
// stored (new or duplicate) and how many were rejected.
func (s *Server) IngestMirrored(ctx context.Context, evs []*protocol.Event) (accepted, rejected int, err error) {
	recs, rejected := s.VerifyMirrored(evs)
	if _, err := s.store.AppendBatch(ctx, recs); err != nil {
		return 0, rejected, err
	}
	return len(recs), rejected, nil
}

// VerifyMirrored checks events as mirrored events and returns the records
// of the valid ones and the number rejected.
func (s *Server) VerifyMirrored(evs []*protocol.Event) ([]eventlog.Record, int) {
	errs := make([]error, len(evs))
	bodies := make([][]byte, len(evs))
	s.CheckMirrored(evs, errs, bodies)
	now := s.now()
	recs := make([]eventlog.Record, 0, len(evs))
	for i, e := range evs {
		if errs[i] == nil {
			recs = append(recs, eventlog.Record{Event: e, Body: bodies[i], RawType: "json", ReceivedAt: now})
		}
	}
	return recs, len(evs) - len(recs)
}

// CheckMirrored verifies evs on every core as mirrored events (SPEC §6.2):
// envelope, limits, id, signature and PoW (protocol.Checker.CheckStored),
// without the freshness window, rate limits, log-dependent rules or kind
// content rules (D15: the folds judge content); never kind 11. It fills
// errs[i] for each bad event; entries already set, or with a nil event,
// are left alone. When bodies is not nil, it also encodes each good
// event's body into it, on the same cores.
func (s *Server) CheckMirrored(evs []*protocol.Event, errs []error, bodies [][]byte) {
	checker := s.cfg.Checker
	checker.Limits.MaxAge = 0
	now := s.now()
	// In author order, a worker verifies an author's events one after
	// another, while that author's key table is in the cache.
	order := make([]int, len(evs))
	for i := range order {
		order[i] = i
	}
	author := func(i int) string {
		if evs[i] == nil {
			return ""
		}
		return evs[i].AgentID
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(author(a), author(b)) })
	var wg sync.WaitGroup
	// Workers take the next 64 events in author order until none are
	// left (so none waits on another that got the slower keys); their
	// signatures are verified together (CheckStoredBatch).
	var next atomic.Int64
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bevs, berrs := make([]*protocol.Event, 0, 64), make([]error, 0, 64)
			for {
				lo := int(next.Add(64)) - 64
				if lo >= len(order) {
					return
				}
				group := order[lo:min(lo+64, len(order))]
				bevs, berrs = bevs[:0], berrs[:0]
				for _, i := range group {
					if errs[i] == nil && evs[i] != nil && evs[i].Kind == protocol.KindHealth {
						errs[i] = protocol.Errorf(CodeNotMirrored, "kind 11 health beats are never mirrored")
					}
					bevs, berrs = append(bevs, evs[i]), append(berrs, errs[i])
				}
				checker.CheckStoredBatch(bevs, now, berrs)
				for k, i := range group {
					if errs[i] = berrs[k]; errs[i] == nil && evs[i] != nil && bodies != nil {
						bodies[i] = protocol.AppendJSON(nil, evs[i])
					}
				}
			}
		}()
	}
	wg.Wait()
}
