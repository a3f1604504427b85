package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/trust"
	"github.com/labstack/echo/v4"
)

func wantsCBOR(c echo.Context) bool {
	return strings.Contains(c.Request().Header.Get(echo.HeaderAccept), protocol.ContentTypeCBOR)
}

func (s *Server) getEvents(c echo.Context) error {
	q, err := ParseQuery(c.QueryParams())
	if err != nil {
		return err
	}
	reader, err := s.reader(c)
	if err != nil {
		return err
	}
	// The state folds each revoke right after its commit and before it is
	// answered, so it knows every revocation a reader could have seen
	// acknowledged; the query leaves revocation to it (eventlog.Log.Query).
	q.Filter.Revoked = s.state.Revoked
	bodies, err := s.store.Query(c.Request().Context(), q.Filter)
	if err != nil {
		return err
	}
	if q.Filter.IncludeRevoked {
		bodies = s.dropWithheld(bodies)
	}
	_, thread := q.Filter.Tags["e"]
	thread = thread || len(q.Filter.IDs) > 0
	if bodies, err = s.onBranches(c, q, bodies, thread && !wantsCBOR(c)); err != nil {
		return err
	}
	v := s.viewer(reader, q.IncludeHidden).withRank(s)
	bodies, left, shown := v.filterBodies(bodies, thread && !wantsCBOR(c))
	v.setHiddenHeaders(c, left, shown)
	return s.writeEvents(c, bodies)
}

// writeEvents answers a list of stored bodies as a JSON array, or as a CBOR
// array when the client accepts application/anp+cbor.
func (s *Server) writeEvents(c echo.Context, bodies [][]byte) error {
	if wantsCBOR(c) {
		evs := make([]*protocol.Event, 0, len(bodies))
		for _, b := range bodies {
			var e protocol.Event
			if err := json.Unmarshal(b, &e); err != nil {
				return err
			}
			evs = append(evs, &e)
		}
		out, err := protocol.EncodeCBORList(evs)
		if err != nil {
			return err
		}
		return c.Blob(http.StatusOK, protocol.ContentTypeCBOR, out)
	}
	n := 2
	for _, b := range bodies {
		n += len(b) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, b := range bodies {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	out = append(out, ']')
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, out)
}

func (s *Server) lookupStored(c echo.Context) (*eventlog.Stored, error) {
	id := c.Param("id")
	if !protocol.IsHex64(id) {
		return nil, protocol.Errorf(CodeBadParameter, "event id must be 64 lowercase hex characters")
	}
	st, err := s.store.Get(c.Request().Context(), id)
	if errors.Is(err, eventlog.ErrNotFound) {
		if w, ok := s.state.Withheld(id); ok { // a counted redaction of an event never stored here
			return nil, WithheldError(id, w)
		}
		return nil, protocol.Errorf(CodeNotFound, "event %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	if w, ok := s.withheldOf(id, st.Body); ok {
		return nil, WithheldError(id, w)
	}
	if _, err := httpx.Params(c, "include_revoked", "include_hidden"); err != nil {
		return nil, err
	}
	inc, err := httpx.BoolParam(c.QueryParams(), "include_revoked")
	if err != nil {
		return nil, err
	}
	incHidden, err := httpx.BoolParam(c.QueryParams(), "include_hidden")
	if err != nil {
		return nil, err
	}
	reader, err := s.reader(c)
	if err != nil {
		return nil, err
	}
	if _, author, ok := BodyIDs(st.Body); ok {
		v := s.viewer(reader, incHidden)
		if !v.allowed(author) {
			return nil, protocol.Errorf(CodeHidden, "event %s is shared by its author only with the agents it follows (discoverability invite_only)", id)
		}
		if !v.sees(id, author) {
			return nil, protocol.Errorf(CodeHidden, "event %s is hidden by moderation; authenticated readers may add include_hidden=true", id)
		}
	}
	if !inc {
		bodies, err := s.store.Query(c.Request().Context(), eventlog.Filter{IDs: []string{id}, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(bodies) == 0 {
			return nil, protocol.Errorf(CodeRevoked, "event %s was revoked by its author; add include_revoked=true to see it", id)
		}
	}
	return st, nil
}

func (s *Server) getEvent(c echo.Context) error {
	st, err := s.lookupStored(c)
	if err != nil {
		return err
	}
	if wantsCBOR(c) {
		var e protocol.Event
		if err := json.Unmarshal(st.Body, &e); err != nil {
			return err
		}
		out, err := protocol.EncodeCBOR(&e)
		if err != nil {
			return err
		}
		return c.Blob(http.StatusOK, protocol.ContentTypeCBOR, out)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, st.Body)
}

// getRaw serves the exact bytes the event arrived as.
func (s *Server) getRaw(c echo.Context) error {
	st, err := s.lookupStored(c)
	if err != nil {
		return err
	}
	ct := echo.MIMEApplicationJSON
	if st.RawType == "cbor" {
		ct = protocol.ContentTypeCBOR
	}
	return c.Blob(http.StatusOK, ct, st.Raw)
}

func (s *Server) getHistory(c echo.Context) error {
	agent := c.Param("agent_id")
	if !protocol.IsHex64(agent) {
		return protocol.Errorf(CodeBadParameter, "agent_id must be 64 lowercase hex characters")
	}
	kind := int64(protocol.KindProfile)
	if k := c.QueryParam("kind"); k != "" {
		n, err := strconv.ParseInt(k, 10, 64)
		if err != nil || !protocol.OverwriteKinds[n] {
			return protocol.Errorf(CodeBadParameter, "kind must be an overwrite kind (0, 4 or 16)")
		}
		kind = n
	}
	reader, err := s.reader(c)
	if err != nil {
		return err
	}
	bodies, err := s.store.History(c.Request().Context(), agent, kind)
	if err != nil {
		return err
	}
	if v := s.viewer(reader, false); !v.allowed(agent) {
		bodies = nil
	}
	return s.writeEvents(c, bodies)
}

// errExportDone ends an export at its through= bound.
var errExportDone = errors.New("export bound reached")

// export streams the log as JSON lines in log order from after= (exclusive),
// up to the log's end when the request started (X-ANP2-Through-Seq). With
// seq=true each line is {"seq":N,"event":{...}} so a reader can resume
// exactly where a broken transfer stopped; through=N stops at seq N (an
// auditor pairs it with the seq of GET /state).
func (s *Server) export(c echo.Context) error {
	v := c.QueryParams()
	var after int64
	if a := v.Get("after"); a != "" {
		n, err := httpx.NonNegative("after", a)
		if err != nil {
			return err
		}
		after = n
	}
	withSeq, err := httpx.BoolParam(v, "seq")
	if err != nil {
		return err
	}
	var until int64 = -1
	if u := v.Get("through"); u != "" {
		if until, err = httpx.NonNegative("through", u); err != nil {
			return err
		}
	}
	keep, err := s.exportBranches(c, v.Get("branch"))
	if err != nil {
		return err
	}
	reader, err := s.reader(c)
	if err != nil {
		return err
	}
	// Anonymous readers never get hidden events (§7.1); mirrors and
	// auditors authenticate (any key) and get the whole log. One snapshot
	// decides for the whole transfer.
	// Anonymous readers do not get the events the modules' reader rule
	// keeps from them either (§12.8 invite_only); X-ANP2-Restricted says
	// such events may be left out.
	var mod *trust.ModSnapshot
	var rule func(reader, author string) bool
	if reader == "" {
		mod = s.viewsState().Moderation.Current(s.now())
		rule = s.readerRule()
	}
	ctx := c.Request().Context()
	res := c.Response()
	w := bufio.NewWriterSize(res, 64<<10)
	n := 0
	begin := func(through int64) error {
		res.Header().Set(echo.HeaderContentType, "application/x-ndjson")
		res.Header().Set("X-ANP2-Through-Seq", strconv.FormatInt(through, 10))
		if mod != nil {
			omitted, err := s.hiddenInRange(ctx, mod, after, through)
			if err != nil {
				return err
			}
			res.Header().Set("X-ANP2-Hidden-Omitted", strconv.Itoa(omitted))
		}
		if rule != nil {
			res.Header().Set("X-ANP2-Restricted", "true")
		}
		res.WriteHeader(http.StatusOK)
		return nil
	}
	start := func(through int64) error {
		if until >= 0 && until < through {
			through = until
		}
		return begin(through)
	}
	err = s.store.Export(ctx, after, start, func(seq int64, body []byte) error {
		if until >= 0 && seq > until {
			return errExportDone
		}
		tomb := s.exportWithheld(body)
		if tomb != nil {
			body = tomb
		}
		if mod != nil && tomb == nil {
			if id, author, ok := BodyIDs(body); ok && (mod.Hidden(id) || rule != nil && !rule("", author)) {
				return nil
			}
		}
		if keep != nil && tomb == nil {
			if e, err := protocol.DecodeJSON(body); err != nil {
				return nil
			} else if ok, _ := keep(e); !ok {
				return nil
			}
		}
		if withSeq {
			w.WriteString(`{"seq":`)
			w.WriteString(strconv.FormatInt(seq, 10))
			w.WriteString(`,"event":`)
			w.Write(body)
			w.WriteByte('}')
		} else {
			w.Write(body)
		}
		if err := w.WriteByte('\n'); err != nil {
			return err
		}
		if n++; n%1000 == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
			res.Flush()
		}
		return nil
	})
	if errors.Is(err, errExportDone) {
		err = nil
	}
	if err != nil {
		if res.Committed {
			s.cfg.Logger.Warn("export interrupted", "err", err)
			return nil
		}
		return err
	}
	return w.Flush()
}

// hiddenInRange counts the events hidden in mod whose log sequence is in
// (after, through]: what an anonymous export leaves out.
func (s *Server) hiddenInRange(ctx context.Context, mod *trust.ModSnapshot, after, through int64) (int, error) {
	n := 0
	for _, h := range mod.HiddenEvents() {
		st, err := s.store.Get(ctx, h.EventID)
		if errors.Is(err, eventlog.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if st.Seq > after && st.Seq <= through {
			n++
		}
	}
	return n, nil
}

// Health is what GET /health reports: the status ("ok"), the log's size
// figures, the relay clock (unix seconds) and the seconds since the relay
// started by that clock.
type Health struct {
	Status                  string
	Events, MaxSeq, DBBytes int64
	Now, UptimeS            int64
}

// Health returns GET /health's figures, or the log's error reading its
// size.
func (s *Server) Health(ctx context.Context) (Health, error) {
	st, err := s.store.Stats(ctx)
	if err != nil {
		return Health{}, err
	}
	now := s.cfg.Now()
	return Health{Status: "ok", Events: st.Events, MaxSeq: st.MaxSeq, DBBytes: st.Bytes,
		Now: now.Unix(), UptimeS: int64(now.Sub(s.started).Seconds())}, nil
}

func (s *Server) health(c echo.Context) error {
	h, err := s.Health(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{
		"status": h.Status, "events": h.Events, "max_seq": h.MaxSeq, "db_bytes": h.DBBytes,
		"now": h.Now, "uptime_s": h.UptimeS,
	})
}

func (s *Server) getMetrics(c echo.Context) error {
	st, err := s.store.Stats(c.Request().Context())
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentType, "text/plain; version=0.0.4")
	c.Response().WriteHeader(http.StatusOK)
	s.metrics.write(c.Response(), st.Events, st.Bytes)
	writeRuntime(c.Response())
	writeFolds(c.Response(), s.state.Sizes(), s.snapshotBytes(), s.resumedSeq())
	writeLogIndexes(c.Response(), s.store, s.index)
	for _, h := range s.metricHooks {
		h(c.Response())
	}
	return nil
}

// EventsByID reads the stored events with ids (revoked ones included) in
// one query per thousand; ids not stored are absent from the map.
func (s *Server) EventsByID(ctx context.Context, ids []string) (map[string]*protocol.Event, error) {
	out := make(map[string]*protocol.Event, len(ids))
	for lo := 0; lo < len(ids); lo += 1000 {
		chunk := ids[lo:min(len(ids), lo+1000)]
		bodies, err := s.store.Query(ctx, eventlog.Filter{IDs: chunk, IncludeRevoked: true, Limit: len(chunk)})
		if err != nil {
			return nil, err
		}
		for _, b := range bodies {
			if e, err := protocol.DecodeJSON(b); err == nil {
				out[e.ID] = e
			}
		}
	}
	return out, nil
}
