package relay

import (
	"encoding/json"
	"errors"
	"mime"
	"net/http"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/labstack/echo/v4"
)

// MaxBatchEvents bounds one POST /events/batch (and POST /gossip) body.
const MaxBatchEvents = 1000

// ReadBatch splits a JSON array body, or a CBOR array with Content-Type
// application/anp+cbor, into its encoded items (at most MaxBatchEvents),
// and says which encoding it was.
func ReadBatch(c echo.Context) ([][]byte, string, error) {
	body, err := readBody(c.Request())
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, "", protocol.Errorf(CodeBodyTooLarge, "request body too large")
		}
		return nil, "", protocol.Errorf(CodeBadParameter, "cannot read body: %v", err)
	}
	mt, _, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	var items [][]byte
	rawType := "json"
	switch mt {
	case protocol.ContentTypeCBOR:
		rawType = "cbor"
		if items, err = protocol.SplitCBORList(body); err != nil {
			return nil, "", err
		}
	case "", "application/json", "application/anp+json":
		var list []json.RawMessage
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, "", protocol.Errorf(CodeBadParameter, "body must be a JSON array of events")
		}
		for _, r := range list {
			items = append(items, r)
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
	items, rawType, err := ReadBatch(c)
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
			rec, pa, err = s.prepare(ctx, e, raw, rawType, ip, now)
		}
		switch {
		case err != nil:
			s.reject(err)
			r.Status, r.Code, r.Detail = errorStatus(err)
		case rec != nil:
			recs, at = append(recs, *rec), append(at, i)
		default:
			r.Status, r.Accepted, r.Duplicate, r.Stored = http.StatusOK, pa.Accepted, pa.Duplicate, pa.Stored
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
	return c.JSON(http.StatusOK, ans)
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
