package a2a

import (
	"context"
	"time"

	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
)

// Module is the A2A adapter as a relay capability module (relay.Module):
// it mounts the AgentCard and the JSON-RPC endpoint on the core, reads
// native tasks from the core's composed state, and closes its open
// streams when the relay stops serving. It keeps no fold: A2A-originated
// tasks live in memory (§9 of SPEC), native ones are the task view's.
type Module struct {
	opts    Options
	adapter *Adapter
}

var _ relay.Runner = (*Module)(nil)

// NewModule returns the module; opts fields left empty are taken from the
// relay's config when it is mounted (public base URL, clock, logger) and
// native tasks always come from the relay.
func NewModule(opts Options) *Module { return &Module{opts: opts} }

// Name is "a2a".
func (m *Module) Name() string { return "a2a" }

// Mount builds the adapter over core and registers its routes.
func (m *Module) Mount(core *relay.Server) error {
	cfg := core.Config()
	opts := m.opts
	if opts.PublicBaseURL == "" {
		opts.PublicBaseURL = cfg.PublicBaseURL
	}
	if opts.Now == nil {
		opts.Now = cfg.Now
	}
	if opts.Logger == nil {
		opts.Logger = cfg.Logger
	}
	if opts.Reader == nil {
		opts.Reader = core.Reader
	}
	opts.Tasks = core.NativeTasks()
	if sh, ok := core.Log().(SharedTasks); ok && opts.Shared == nil {
		opts.Shared = sh
	}
	opts.Branch = func(branch string) (Tasks, error) {
		src, err := core.NativeTasksIn(context.Background(), branch)
		return src, err
	}
	m.adapter = New(opts)
	m.adapter.Mount(core.Route)
	if opts.Push != nil {
		core.OnCommit(func([]eventlog.Committed) { m.adapter.pushWake() })
	}
	return nil
}

// Run closes the adapter's open streams when ctx ends, so that the
// server's shutdown need not wait for them. With a Pusher it also queues
// task updates for their push configs: after each commit, after a new
// config, and every 5 s (a deadline passing changes a status without an
// event).
func (m *Module) Run(ctx context.Context) {
	defer m.adapter.Close()
	if m.adapter.opts.Push == nil {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		if err := m.adapter.notifyAll(ctx); err != nil && ctx.Err() == nil {
			m.adapter.opts.Logger.Warn("a2a: queueing push notifications failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-m.adapter.pushSignal:
		case <-t.C:
		}
	}
}

// Adapter returns the mounted adapter (nil before Mount).
func (m *Module) Adapter() *Adapter { return m.adapter }
