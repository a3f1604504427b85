package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/anp2net/relay/tasks"
	"github.com/labstack/echo/v4"
)

// sse writes JSON-RPC responses as Server-Sent Events, one compact JSON
// object per data line.
type sse struct {
	res *echo.Response
	id  json.RawMessage
}

func startSSE(c echo.Context, id json.RawMessage) *sse {
	h := c.Response().Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	c.Response().WriteHeader(http.StatusOK)
	c.Response().Flush()
	return &sse{res: c.Response(), id: id}
}

// write sends v as one event; false when the client is gone.
func (s *sse) write(v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(errorResponse(s.id, rpcError(CodeInternalError, "")))
	}
	if _, err := fmt.Fprintf(s.res, "data: %s\n\n", b); err != nil {
		return false
	}
	s.res.Flush()
	return true
}

func (s *sse) result(v any) bool { return s.write(resultResponse(s.id, v)) }

func (s *sse) comment(text string) bool {
	if _, err := fmt.Fprintf(s.res, ": %s\n\n", text); err != nil {
		return false
	}
	s.res.Flush()
	return true
}

// streamFunc runs a stream once its headers are sent.
type streamFunc func(ctx context.Context, w *sse)

// serveStream answers message/stream and tasks/resubscribe with an SSE
// stream of JSON-RPC responses. An error found before the stream starts is
// one SSE error event when the client asked for text/event-stream, else a
// plain JSON-RPC error.
func (a *Adapter) serveStream(c echo.Context, req request) error {
	run, err := a.planStream(req, a.base(c))
	if err != nil {
		if !strings.Contains(c.Request().Header.Get("Accept"), "text/event-stream") {
			return a.writeJSON(c, errorResponse(req.ID, err))
		}
		startSSE(c, req.ID).write(errorResponse(req.ID, err))
		return nil
	}
	w := startSSE(c, req.ID)
	defer func() {
		if p := recover(); p != nil {
			a.opts.Logger.Error("a2a: stream panicked", "method", req.Method, "panic", p)
			w.write(errorResponse(req.ID, rpcError(CodeInternalError, "")))
		}
	}()
	run(c.Request().Context(), w)
	return nil
}

// planStream checks the params and returns what the stream will send.
func (a *Adapter) planStream(req request, base string) (run streamFunc, err *Error) {
	defer func() {
		if p := recover(); p != nil {
			a.opts.Logger.Error("a2a: stream setup panicked", "method", req.Method, "panic", p)
			run, err = nil, rpcError(CodeInternalError, "")
		}
	}()
	if req.Method == "tasks/resubscribe" {
		id, _, err := parseQuery(req.Params)
		if err != nil {
			return nil, err
		}
		if t, ok := a.store.get(id); ok {
			return func(_ context.Context, w *sse) {
				_ = w.result(t) && w.result(finalOf(t))
			}, nil
		}
		v, ok := a.lookupNative(id)
		if !ok {
			return nil, rpcError(CodeTaskNotFound, "no A2A task and no native kind-50 task has this id", "id", id)
		}
		return func(ctx context.Context, w *sse) { a.follow(ctx, w, v, base) }, nil
	}
	p, md, err := parseSend(req.Params)
	if err != nil {
		return nil, err
	}
	if id := p.Message.TaskID; id != "" {
		v, err := a.existingTask(id)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, w *sse) { a.follow(ctx, w, v, base) }, nil
	}
	t := a.onboard(p.Message, md, base)
	a.store.put(t)
	return func(_ context.Context, w *sse) { streamOnboarding(w, t) }, nil
}

// streamOnboarding sends the A2A task as it unfolds: working with the
// caller's message, the onboarding artifact, the final completed status.
func streamOnboarding(w *sse, t Task) {
	first := t
	first.Status = TaskStatus{State: StateWorking, Timestamp: t.Status.Timestamp}
	first.History = t.History[:1]
	first.Artifacts = nil
	if !w.result(first) {
		return
	}
	for _, art := range t.Artifacts {
		up := ArtifactUpdate{Kind: "artifact-update", TaskID: t.ID, ContextID: t.ContextID, Artifact: art, LastChunk: true}
		if !w.result(up) {
			return
		}
	}
	w.result(finalOf(t))
}

// finalOf is the final status-update of a terminal A2A task.
func finalOf(t Task) StatusUpdate {
	return StatusUpdate{Kind: "status-update", TaskID: t.ID, ContextID: t.ContextID, Status: t.Status,
		Final: true, Metadata: t.Metadata}
}

// follow streams a native task: a snapshot, then one status-update per new
// transition, the last one final once the projected state is terminal. It
// polls the task source every PollInterval and ends without a final frame
// after MaxStream (the client resubscribes) or when the client leaves.
func (a *Adapter) follow(ctx context.Context, w *sse, v tasks.TaskView, base string) {
	if !w.result(a.nativeTask(v, base, -1, false)) {
		return
	}
	if Project(v.Status).Terminal() {
		w.result(statusFrame(v, len(v.History)-1, true, false))
		return
	}
	sent := v.History
	poll, keep, limit := time.NewTicker(a.opts.PollInterval), time.NewTicker(a.opts.KeepAlive), time.NewTimer(a.opts.MaxStream)
	defer func() { poll.Stop(); keep.Stop(); limit.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.closed:
			w.comment("the relay is shutting down; call tasks/resubscribe to continue")
			return
		case <-limit.C:
			w.comment("stream time limit reached; call tasks/resubscribe to continue")
			return
		case <-keep.C:
			if !w.comment("keep-alive") {
				return
			}
		case <-poll.C:
			nv, ok := a.lookupNative(v.TaskID)
			if !ok {
				w.write(errorResponse(w.id, rpcError(CodeTaskNotFound, "the task left the relay's derived state (its request was revoked)", "id", v.TaskID)))
				return
			}
			if done := sendTransitions(w, sent, nv); done {
				return
			}
			sent = nv.History
		}
	}
}

// sendTransitions sends the transitions of nv not yet sent (from the first
// entry that differs from sent). It reports whether the stream is over: the
// task reached a terminal state or the client left.
func sendTransitions(w *sse, sent []tasks.Transition, nv tasks.TaskView) bool {
	from := divergence(sent, nv.History)
	terminal := Project(nv.Status).Terminal()
	rewritten := from < len(sent)
	for i := from; i < len(nv.History); i++ {
		if !w.result(statusFrame(nv, i, terminal && i == len(nv.History)-1, rewritten)) {
			return true
		}
	}
	if terminal && from == len(nv.History) {
		w.result(statusFrame(nv, len(nv.History)-1, true, false))
	}
	return terminal
}

// divergence is the index of the first transition of next that differs
// from prev (len(next) when next only extends prev or equals it).
func divergence(prev, next []tasks.Transition) int {
	for i := range next {
		if i >= len(prev) || prev[i] != next[i] {
			return i
		}
	}
	return len(next)
}

// statusFrame is the status-update for transition i of v. rewritten marks
// frames that replace transitions sent earlier (a late event reordered the
// task's history).
func statusFrame(v tasks.TaskView, i int, final, rewritten bool) StatusUpdate {
	tr := tasks.Transition{Status: v.Status, At: v.CreatedAt}
	if i >= 0 && i < len(v.History) {
		tr = v.History[i]
	}
	msg := transitionMessage(v.TaskID, i, tr)
	meta := transitionData(tr)
	meta["transition"] = i
	if rewritten {
		meta["rewritten"] = true
	}
	return StatusUpdate{
		Kind: "status-update", TaskID: v.TaskID, ContextID: v.TaskID, Final: final, Metadata: meta,
		Status: TaskStatus{State: Project(tr.Status), Timestamp: timestamp(time.Unix(tr.At, 0)), Message: &msg},
	}
}
