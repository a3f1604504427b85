// Package a2a is the relay's A2A v0.3.0 adapter (seed §19, decision D12):
// the AgentCard and a JSON-RPC 2.0 endpoint that answers A2A clients with
// deterministic onboarding and projects the relay's native kind-50 tasks
// onto A2A tasks. It is an adapter around package tasks and knows nothing
// of the relay that mounts it. A2A.md describes the surface.
package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks"
	"github.com/labstack/echo/v4"
)

// Tasks is the native task source: the relay's task fold at its clock.
type Tasks interface {
	// Task returns the native task with id, or false.
	Task(id string) (tasks.TaskView, bool)
	// List returns the native tasks matching f, newest first.
	List(f tasks.Filter) []tasks.TaskView
}

// Options configure an Adapter. Zero values take the defaults noted.
type Options struct {
	// PublicBaseURL is the relay's public base URL; the card's url is it
	// plus "/a2a". Empty: derived from each request's scheme and Host (and
	// its /api prefix).
	PublicBaseURL string
	// Tasks is the native task source; nil serves A2A-originated tasks only.
	Tasks Tasks
	// Branch, when set, returns the native task source of one branch for
	// tasks/get's and tasks/list's branch param (SPEC §9, §17.5); its
	// error's text is shown as invalid params. Nil: a branch param other
	// than "" is invalid.
	Branch func(branch string) (Tasks, error)
	// Now is the clock for A2A task timestamps (default time.Now).
	Now func() time.Time
	// MaxTasks bounds the in-memory A2A task store (default 512, FIFO).
	MaxTasks int
	// MaxBody bounds a JSON-RPC request body in bytes (default 64 KiB).
	MaxBody int64
	// MaxBatch bounds the requests in one batch (default 32).
	MaxBatch int
	// PollInterval is how often a stream re-reads a native task (default 250 ms).
	PollInterval time.Duration
	// KeepAlive is the interval of SSE comment lines on an idle stream (default 15 s).
	KeepAlive time.Duration
	// MaxStream ends a stream that has not reached a terminal state after
	// this long, without a final frame, so the client resubscribes (default 10 min).
	MaxStream time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
	// Name, Organization and Version fill the card (defaults "ANP2 relay",
	// "ANP2 network", the ANP2 protocol version "0.1.3").
	Name, Organization, Version string
	// DocumentationURL is the card's documentationUrl (omitted when empty).
	DocumentationURL string
	// Push, when set, serves tasks/pushNotificationConfig/* and delivers
	// task updates through it (the card then says pushNotifications:
	// true); nil answers those methods -32003.
	Push Pusher
	// Reader returns the agent a request is authenticated as by its D4
	// "Authorization: ANP2 …" header, "" for an anonymous request, or an
	// error for a header that proves nothing (the relay's Reader). A push
	// config belongs to its task's requester, so the push-config methods
	// ask it; nil takes every caller as anonymous.
	Reader func(echo.Context) (string, error)
	// Shared, when set, keeps A2A-originated tasks where every relay
	// process over the same log reads them (Module sets it to the log
	// when the log implements SharedTasks: PostgreSQL).
	Shared SharedTasks
}

// Adapter serves the A2A surface. It is safe for concurrent use.
type Adapter struct {
	opts  Options
	store *store
	// pushSignal wakes the push notifier (a commit, a new config).
	pushSignal chan struct{}
	// closed ends open streams (Close).
	closed    chan struct{}
	closeOnce sync.Once
}

// New returns an Adapter with opts, defaults filled in.
func New(opts Options) *Adapter {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxTasks <= 0 {
		opts.MaxTasks = 512
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = 64 << 10
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 32
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 250 * time.Millisecond
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.MaxStream <= 0 {
		opts.MaxStream = 10 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Name = cmpOr(opts.Name, "ANP2 relay")
	opts.Organization = cmpOr(opts.Organization, "ANP2 network")
	opts.Version = cmpOr(opts.Version, "0.1.3")
	opts.PublicBaseURL = strings.TrimRight(opts.PublicBaseURL, "/")
	st := newStore(opts.MaxTasks)
	st.shared, st.log = opts.Shared, opts.Logger
	return &Adapter{opts: opts, store: st, closed: make(chan struct{}), pushSignal: make(chan struct{}, 1)}
}

// Close ends every open stream without a final frame (clients resubscribe
// elsewhere or later), so a server shutting down is not held by streams
// that would otherwise poll until MaxStream. Requests after Close are still
// answered; new streams end at once. Close is idempotent.
func (a *Adapter) Close() { a.closeOnce.Do(func() { close(a.closed) }) }

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Mount registers the card routes and the JSON-RPC endpoint with add (the
// relay's add also serves each path under /api, D1).
func (a *Adapter) Mount(add func(method, path string, h echo.HandlerFunc)) {
	add(http.MethodGet, "/.well-known/agent-card.json", a.serveCard)
	add(http.MethodGet, "/.well-known/agent.json", a.serveCard)
	add(http.MethodPost, "/a2a", a.serveRPC)
}

// base is the public base URL for links in answers to c.
func (a *Adapter) base(c echo.Context) string {
	if a.opts.PublicBaseURL != "" {
		return a.opts.PublicBaseURL
	}
	b := c.Scheme() + "://" + c.Request().Host
	if strings.HasPrefix(c.Request().URL.Path, "/api/") {
		b += "/api"
	}
	return b
}

func (a *Adapter) serveCard(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "public, max-age=300")
	c.Response().Header().Set("Access-Control-Allow-Origin", "*") // public, read-only
	return c.JSON(http.StatusOK, a.card(a.base(c)))
}

// serveRPC answers one JSON-RPC request or batch. Every JSON-RPC error goes
// with HTTP 200; a request of notifications only is answered 204.
func (a *Adapter) serveRPC(c echo.Context) error {
	raw, err := io.ReadAll(io.LimitReader(c.Request().Body, a.opts.MaxBody+1))
	if err != nil {
		return a.writeJSON(c, errorResponse(nil, rpcError(CodeInvalidRequest, "the request body could not be read")))
	}
	if int64(len(raw)) > a.opts.MaxBody {
		return a.writeJSON(c, errorResponse(nil, rpcError(CodeInvalidRequest, "request body too large", "max_bytes", a.opts.MaxBody)))
	}
	// The body stays readable for the D4 header's payload check, which
	// runs only when a method asks who the caller is.
	c.Request().Body = io.NopCloser(bytes.NewReader(raw))
	ctx := withCaller(c.Request().Context(), a.callerOf(c))
	body := bytes.TrimSpace(raw)
	if !json.Valid(body) {
		return a.writeJSON(c, errorResponse(nil, rpcError(CodeParseError, "the body is not valid JSON")))
	}
	if body[0] == '[' {
		return a.serveBatch(ctx, c, body)
	}
	req, perr := parseRequest(body)
	if perr != nil {
		return a.writeJSON(c, errorResponse(req.ID, perr))
	}
	if streaming(req.Method) {
		if !req.HasID {
			return c.NoContent(http.StatusNoContent) // a stream nobody reads
		}
		return a.serveStream(c, req)
	}
	resp := a.call(ctx, req, a.base(c))
	if !req.HasID {
		return c.NoContent(http.StatusNoContent)
	}
	return a.writeJSON(c, resp)
}

// serveBatch answers a JSON-RPC batch: one response per request that has an
// id, in order (JSON-RPC 2.0 §6).
func (a *Adapter) serveBatch(ctx context.Context, c echo.Context, body []byte) error {
	var items []json.RawMessage
	if err := json.Unmarshal(body, &items); err != nil {
		return a.writeJSON(c, errorResponse(nil, rpcError(CodeParseError, "the body is not valid JSON")))
	}
	switch {
	case len(items) == 0:
		return a.writeJSON(c, errorResponse(nil, rpcError(CodeInvalidRequest, "empty batch")))
	case len(items) > a.opts.MaxBatch:
		return a.writeJSON(c, errorResponse(nil, rpcError(CodeInvalidRequest, "batch too large", "max_batch", a.opts.MaxBatch)))
	}
	base := a.base(c)
	out := make([]response, 0, len(items))
	for _, raw := range items {
		req, perr := parseRequest(raw)
		switch {
		case perr != nil:
			out = append(out, errorResponse(req.ID, perr))
		case !req.HasID:
			if !streaming(req.Method) {
				a.call(ctx, req, base)
			}
		case streaming(req.Method):
			out = append(out, errorResponse(req.ID, rpcError(CodeUnsupportedOperation,
				req.Method+" answers with an event stream and cannot be part of a batch; send it alone")))
		default:
			out = append(out, a.call(ctx, req, base))
		}
	}
	if len(out) == 0 {
		return c.NoContent(http.StatusNoContent)
	}
	return a.writeJSON(c, out)
}

// writeJSON sends v with HTTP 200; a value that cannot be encoded becomes
// an internal error.
func (a *Adapter) writeJSON(c echo.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		a.opts.Logger.Error("a2a: encode response", "err", err)
		b, _ = json.Marshal(errorResponse(nil, rpcError(CodeInternalError, "")))
	}
	return c.JSONBlob(http.StatusOK, b)
}

// call runs one request and returns its response. A panic in a method is
// logged and answered -32603.
func (a *Adapter) call(ctx context.Context, req request, base string) (resp response) {
	defer func() {
		if p := recover(); p != nil {
			a.opts.Logger.Error("a2a: method panicked", "method", req.Method, "panic", p)
			resp = errorResponse(req.ID, rpcError(CodeInternalError, ""))
		}
	}()
	result, err := a.dispatch(ctx, req, base)
	if err != nil {
		return errorResponse(req.ID, err)
	}
	// Encode here, so that a failure is this request's -32603 and not a
	// broken batch.
	b, merr := json.Marshal(result)
	if merr != nil {
		a.opts.Logger.Error("a2a: encode result", "method", req.Method, "err", merr)
		return errorResponse(req.ID, rpcError(CodeInternalError, ""))
	}
	return resultResponse(req.ID, json.RawMessage(b))
}

// now is the adapter clock.
func (a *Adapter) now() time.Time { return a.opts.Now() }

// lookupNative returns the native task with id from the task source.
func (a *Adapter) lookupNative(id string) (tasks.TaskView, bool) {
	return lookupIn(a.opts.Tasks, id)
}

// lookupIn returns the native task with id from src.
func lookupIn(src Tasks, id string) (tasks.TaskView, bool) {
	if src == nil || !protocol.IsHex64(id) {
		return tasks.TaskView{}, false
	}
	return src.Task(id)
}

// source returns the native task source of branch ("": the default, the
// relay's preferred branch).
func (a *Adapter) source(branch string) (Tasks, *Error) {
	if branch == "" || a.opts.Tasks == nil {
		return a.opts.Tasks, nil
	}
	if a.opts.Branch == nil {
		return nil, invalidParams("this relay serves no branches: omit branch")
	}
	src, err := a.opts.Branch(branch)
	if err != nil {
		return nil, invalidParams("branch: %s", protocolDetail(err))
	}
	return src, nil
}

// protocolDetail is err's detail without its code.
func protocolDetail(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Detail
	}
	return err.Error()
}

// branchOf reads the branch param: params.branch or params.metadata.branch
// (both strings; when both are given they must agree).
func branchOf(top *string, metadata map[string]any) (string, *Error) {
	var b string
	if top != nil {
		b = *top
	}
	if m, ok := metadata["branch"]; ok && m != nil {
		s, ok := m.(string)
		if !ok {
			return "", invalidParams("metadata.branch must be a string")
		}
		if b != "" && s != b {
			return "", invalidParams("branch and metadata.branch disagree")
		}
		b = s
	}
	return b, nil
}
