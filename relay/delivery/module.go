package delivery

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

// Options configure the module. Zero values take the defaults noted.
type Options struct {
	// Path is the queue's SQLite file (default: the log's path plus
	// ".delivery").
	Path string
	// AllowPrivate admits webhook targets on loopback and private
	// addresses, and http:// targets (default: https to public addresses
	// only).
	AllowPrivate bool
	// Workers is how many deliveries are sent at once (default 128).
	Workers int
	// WatchdogTTL is how long an attempt may stay without outcome before
	// the watchdog escalates it (default 60 s).
	WatchdogTTL time.Duration
	// SendTimeout bounds one webhook request (default 10 s; at most
	// WatchdogTTL).
	SendTimeout time.Duration
	// MaxAttempts is how many attempts a delivery gets before it is a dead
	// letter (default 8).
	MaxAttempts int
	// MaxBackoff caps the wait between attempts (default 1 h).
	MaxBackoff time.Duration
	// MaxTriggersPerOwner caps one agent's triggers (default 50).
	MaxTriggersPerOwner int
	// Poll is how often the queue is checked without a wake-up (default
	// 500 ms).
	Poll time.Duration
	// Retention is how long delivered and failed deliveries (and their
	// idempotency keys) are kept after their last change (default 7 days,
	// at least 24 h).
	Retention time.Duration
	// OwnerConcurrency caps one owner's attempts in flight (default a
	// quarter of Workers), HostConcurrency one target host's (default
	// half of Workers): SPEC §20.2.
	OwnerConcurrency, HostConcurrency int
	// BreakerFailures consecutive failed attempts to a host open its
	// circuit breaker (default 5) for BreakerCooldown (default 30 s),
	// doubling at each reopening up to BreakerMaxCooldown (default 10 min).
	BreakerFailures                     int
	BreakerCooldown, BreakerMaxCooldown time.Duration
	// FilterBudget is the time one owner's filters may take on one event
	// (default 100 ms), RegexWork the regex work they may do on it, in
	// program instructions times bytes scanned (default 2^20); the
	// trigger that would cross either is paused (SPEC §20.2).
	FilterBudget time.Duration
	RegexWork    int64
	// TriggerPoW is the proof of work, in leading zero bits of the id of
	// the D4 Authorization event, that registering a trigger costs
	// (default 0: none; anp2 serve sets 20).
	TriggerPoW int
	// ApprovalTTL is how long a high-risk invocation waits for its
	// owner's approval before it expires (default 24 h).
	ApprovalTTL time.Duration
}

func (o *Options) defaults() {
	if o.Workers <= 0 {
		o.Workers = 128
	}
	if o.WatchdogTTL <= 0 {
		o.WatchdogTTL = time.Minute
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = 10 * time.Second
	}
	o.SendTimeout = min(o.SendTimeout, o.WatchdogTTL)
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 8
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Hour
	}
	if o.MaxTriggersPerOwner <= 0 {
		o.MaxTriggersPerOwner = 50
	}
	if o.Retention <= 0 {
		o.Retention = 7 * 24 * time.Hour
	}
	o.Retention = max(o.Retention, 24*time.Hour)
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.OwnerConcurrency <= 0 {
		o.OwnerConcurrency = max(1, o.Workers/4)
	}
	if o.HostConcurrency <= 0 {
		o.HostConcurrency = max(1, o.Workers/2)
	}
	if o.BreakerFailures <= 0 {
		o.BreakerFailures = 5
	}
	if o.BreakerCooldown <= 0 {
		o.BreakerCooldown = 30 * time.Second
	}
	if o.BreakerMaxCooldown <= 0 {
		o.BreakerMaxCooldown = 10 * time.Minute
	}
	o.BreakerMaxCooldown = max(o.BreakerMaxCooldown, o.BreakerCooldown)
	if o.FilterBudget <= 0 {
		o.FilterBudget = 100 * time.Millisecond
	}
	if o.ApprovalTTL <= 0 {
		o.ApprovalTTL = 24 * time.Hour
	}
	if o.RegexWork <= 0 {
		o.RegexWork = 1 << 20
	}
}

// Module is the trigger and delivery capability.
type Module struct {
	opts   Options
	core   *relay.Server
	store  *store
	key    ed25519.PrivateKey
	client *http.Client
	log    *slog.Logger

	mu    sync.RWMutex
	trigs map[string]*storedTrigger
	// manifests are the agent manifests by owner "/" id, under mfMu,
	// which is never held while waiting for the queue's connection (the
	// matcher reads manifests inside its transaction); mfWrite
	// serializes the routes that change them.
	mfMu      sync.RWMutex
	mfWrite   sync.Mutex
	manifests map[string]*Manifest
	// ix files trigs for the matcher; rebuilt (under mu) at each change.
	ix atomic.Pointer[index]
	// matchMu is held by each matcher pass and by a trigger's creation,
	// so a new trigger starts exactly at the matcher's cursor. cursor is
	// the queue's cursor (the last log sequence matched), as committed;
	// matchMu guards it.
	matchMu sync.Mutex
	cursor  int64
	// feed holds the events committed since Mount for the matcher.
	feed feed

	matchWake, dispatchWake chan struct{}
	// slots holds one token per attempt in flight (at most Workers);
	// workers counts their goroutines. backlog says the last claim was
	// full: more is due than the workers take.
	slots   chan struct{}
	workers sync.WaitGroup
	backlog atomic.Bool
	// fair shares the workers between owners and target hosts; lastTurn
	// is the last owner a claim reached (the dispatcher's: the next claim
	// starts after it).
	fair     *fair
	lastTurn string
	// finished counts the attempts finished since the last claim.
	finished atomic.Int64

	// cards caches A2A targets' JSON-RPC endpoints.
	cards cardCache
	// bodies caches event bodies for attempts (eventBody).
	bodyMu sync.Mutex
	bodies map[string][]byte

	throttled, cascadeRejected, staleAcks atomic.Int64
	// upserts counts matches that replaced a delivery by its
	// deduplication key (seed 000 §7).
	upserts atomic.Int64
	// outcomes holds the outcome events waiting to be stored (emitter);
	// outGate bounds them per owner.
	outcomes                         chan *protocol.Event
	outGate                          outcomeGate
	outcomesEmitted, outcomesDropped atomic.Int64
	// overBudget counts triggers passed over for their owner's filter
	// budget (evaluate), paused the triggers paused for it.
	overBudget, paused atomic.Int64
	// spent holds the Authorization events that paid for a trigger.
	spent spentAuth
	// pushes counts the stored A2A push configs (HasPushConfigs).
	pushes atomic.Int64
}

var _ relay.Runner = (*Module)(nil)

// NewModule returns the delivery module.
func NewModule(opts Options) *Module {
	opts.defaults()
	m := &Module{opts: opts, trigs: map[string]*storedTrigger{}, manifests: map[string]*Manifest{}, feed: feed{max: maxFeed},
		matchWake: make(chan struct{}, 1), outcomes: make(chan *protocol.Event, maxOutcomeQueue), dispatchWake: make(chan struct{}, 1), slots: make(chan struct{}, opts.Workers),
		fair: newFair(opts.OwnerConcurrency, opts.HostConcurrency, opts.BreakerFailures,
			opts.BreakerCooldown.Milliseconds(), opts.BreakerMaxCooldown.Milliseconds())}
	m.ix.Store(newIndex(nil))
	return m
}

// Name is "delivery".
func (m *Module) Name() string { return "delivery" }

// Mount opens the queue, loads the triggers and registers the routes.
func (m *Module) Mount(core *relay.Server) error {
	m.core = core
	cfg := core.Config()
	m.log = cfg.Logger
	m.key = cfg.RelayKey
	if m.key == nil {
		_, m.key, _ = ed25519.GenerateKey(nil)
		m.log.Warn("delivery: no relay key configured; webhooks are signed by a key that changes at each start")
	}
	path := m.opts.Path
	if path == "" {
		p, ok := core.Log().(interface{ Path() string })
		if !ok {
			return errors.New("delivery: Options.Path is required for a log without a file path")
		}
		path = p.Path() + ".delivery"
	}
	st, err := openStore(path)
	if err != nil {
		return err
	}
	m.store = st
	if err := m.countPushConfigs(context.Background()); err != nil {
		return err
	}
	ctx := context.Background()
	trigs, err := st.triggers(ctx, true)
	if err != nil {
		return err
	}
	for _, t := range trigs {
		m.trigs[t.ID] = t
	}
	if err := m.loadManifests(ctx); err != nil {
		return err
	}
	m.ix.Store(newIndex(m.trigs))
	// The feed starts now: what the log holds before is read from the
	// log (the end is read after the hook is in place, so no commit falls
	// between the two).
	core.OnCommit(m.committed)
	end, err := m.logEnd(ctx)
	if err != nil {
		return err
	}
	m.feed.markGap(end)
	if cur, ok, err := st.cursor(ctx); err != nil {
		return err
	} else if ok {
		m.cursor = cur
	} else { // a new queue matches from the log's end on
		if _, err := st.db.Exec(`INSERT INTO cursor(k, seq) VALUES (1, ?)`, end); err != nil {
			return err
		}
		m.cursor = end
	}
	m.client = newClient(m.opts.AllowPrivate, m.opts.Workers)
	relay.RegisterStatus(CodeTooManyTriggers, http.StatusTooManyRequests)
	relay.RegisterStatus(CodeTriggerNotFound, http.StatusNotFound)
	relay.RegisterStatus(CodeManifestNotFound, http.StatusNotFound)
	relay.RegisterStatus(CodeDeliveryNotFound, http.StatusNotFound)
	relay.RegisterStatus(CodeTooManyManifests, http.StatusTooManyRequests)
	relay.RegisterStatus(CodeTriggerExists, http.StatusConflict)
	relay.RegisterStatus(CodeNotAwaiting, http.StatusConflict)
	core.AddMetrics(m.writeMetrics)
	core.OnPublish(m.cascadeGate)
	core.OnDryRun(func(e *protocol.Event, _ int64) error { return m.cascadeGate(context.Background(), e, time.Time{}) })
	core.Route(http.MethodPost, "/triggers", m.postTrigger)
	core.Route(http.MethodGet, "/triggers", m.getTriggers)
	core.Route(http.MethodDelete, "/triggers/:id", m.deleteTrigger)
	core.Route(http.MethodPost, "/triggers/:id/resume", m.resumeTrigger)
	core.Route(http.MethodGet, "/deliveries", m.getDeliveries)
	core.Route(http.MethodPatch, "/triggers/:id", m.patchTrigger)
	core.Route(http.MethodPost, "/manifests", m.postManifest)
	core.Route(http.MethodGet, "/manifests", m.getManifests)
	core.Route(http.MethodDelete, "/manifests/:id", m.deleteManifest)
	core.Route(http.MethodPost, "/deliveries/:id/approve", m.approveDelivery)
	core.Route(http.MethodPost, "/deliveries/:id/reject", m.rejectDelivery)
	core.Route(http.MethodGet, "/audit", m.getAudit)
	return nil
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (m *Module) wakeDispatcher() { signal(m.dispatchWake) }

// committed is the relay's commit hook: it hands the batch to the
// matcher's feed and wakes the matcher. While no trigger exists the feed
// keeps nothing (the matcher has nothing to match, and the first trigger
// starts at the log's end).
func (m *Module) committed(batch []eventlog.Committed) {
	m.feed.add(batch, m.ix.Load().all > 0)
	signal(m.matchWake)
}

// now is the relay clock in milliseconds.
func (m *Module) now() int64 { return m.core.Config().Now().UnixMilli() }

// logEnd returns the log's last sequence.
func (m *Module) logEnd(ctx context.Context) (int64, error) {
	var end int64
	err := m.core.Log().Export(ctx, math.MaxInt64, func(t int64) error { end = t; return nil }, func(int64, []byte) error { return nil })
	return end, err
}

func (m *Module) snapshot() []*storedTrigger {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*storedTrigger, 0, len(m.trigs))
	for _, t := range m.trigs {
		out = append(out, t)
	}
	return out
}

// Close closes the queue of a module whose Run never ran (a relay that
// stopped between mounting and serving): its writer and checkpointer
// would otherwise outlive the relay and keep the file open. After Run it
// does nothing more.
func (m *Module) Close() error {
	if m.store == nil {
		return nil
	}
	return m.store.close()
}

// Run matches and dispatches until ctx ends, then closes the queue.
// Attempts left in flight by a previous process (a crash) are escalated
// at once: no worker of this process owns them.
func (m *Module) Run(ctx context.Context) {
	defer m.store.close()
	now := m.now()
	if _, err := m.store.db.ExecContext(ctx, `UPDATE deliveries SET status = ?, owner_lease = owner_lease + 1, next_at = ?,
		last_error = 'relay restarted during the attempt', updated_at = ? WHERE status IN (?, ?)`,
		StatusEscalated, now, now, StatusDispatched, StatusLocked); err != nil {
		m.log.Warn("delivery: escalating orphaned attempts failed", "err", err)
	}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); m.emitter(ctx) }()
	go func() { defer wg.Done(); m.matcher(ctx) }()
	go func() { defer wg.Done(); m.dispatcher(ctx) }()
	wg.Wait()
	m.workers.Wait()
}

// startWorker sends c on a worker of its own; the caller holds a slot
// for it, which the worker gives back.
func (m *Module) startWorker(ctx context.Context, c claimed) {
	m.workers.Add(1)
	go func() {
		defer m.workers.Done()
		defer func() {
			<-m.slots
			// Under a backlog a finished worker wakes the dispatcher
			// once a claim's worth of workers has finished since the
			// last claim (a claim is a transaction: one per delivery
			// would cost more than the deliveries; counting free workers
			// instead would wake it at every finish while the shares,
			// not the workers, hold the backlog back); otherwise new
			// work wakes it (the matcher, a notification).
			if m.backlog.Load() && m.finished.Add(1) >= int64(max(1, m.opts.Workers/8)) {
				signal(m.dispatchWake)
			}
		}()
		m.deliver(ctx, c)
	}()
}

func (m *Module) matcher(ctx context.Context) {
	t := time.NewTicker(m.opts.Poll)
	defer t.Stop()
	for {
		done, err := m.matchOnce(ctx)
		if err != nil && ctx.Err() == nil {
			m.log.Warn("delivery: matching failed", "err", err)
		}
		if err == nil && !done {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-m.matchWake:
		case <-t.C:
		}
	}
}

func (m *Module) dispatcher(ctx context.Context) {
	t := time.NewTicker(m.opts.Poll)
	defer t.Stop()
	var pruned, watched int64
	for {
		now := m.now()
		if now-pruned >= time.Hour.Milliseconds() {
			if err := m.prune(ctx, now); err != nil && ctx.Err() == nil {
				m.log.Warn("delivery: pruning failed", "err", err)
			}
			pruned = now
		}
		// Deadlines are a watchdog TTL (a minute) away: one pass a second
		// of the relay clock is enough, not one per wake-up.
		if now-watched >= 1000 || now < watched {
			if err := m.watchdog(ctx, now); err != nil && ctx.Err() == nil {
				m.log.Warn("delivery: watchdog failed", "err", err)
			}
			watched = now
		}
		free := m.opts.Workers - len(m.slots)
		var batch []claimed
		m.finished.Store(0)
		if free > 0 {
			var err error
			var left bool
			if batch, left, err = m.claim(ctx, now, free); err != nil && ctx.Err() == nil {
				m.log.Warn("delivery: claim failed", "err", err)
			}
			// A full batch, or due work left for want of a share: more
			// may be due, and the workers call again as they free up.
			m.backlog.Store(len(batch) == free || left)
		} else {
			// Every worker busy: what is due waits, so the matcher queues
			// new matches behind it rather than taking the next free
			// worker itself.
			m.backlog.Store(true)
		}
		for _, c := range batch {
			m.slots <- struct{}{}
			m.startWorker(ctx, c)
		}
		if len(batch) == free && free > 0 {
			continue // more may be due
		}
		select {
		case <-ctx.Done():
			return
		case <-m.dispatchWake:
		case <-t.C:
		}
	}
}

// prune deletes terminal deliveries older than Retention. The matcher's
// cursor never goes back, so a pruned key cannot be matched again.
func (m *Module) prune(ctx context.Context, now int64) error {
	_, err := m.store.db.ExecContext(ctx, `DELETE FROM deliveries WHERE status IN (?, ?) AND updated_at < ?`,
		StatusDelivered, StatusFailed, now-m.opts.Retention.Milliseconds())
	if err != nil {
		return err
	}
	// Audit records are kept as long as the deliveries they describe.
	_, err = m.store.db.ExecContext(ctx, `DELETE FROM audit WHERE at < ?`, now-m.opts.Retention.Milliseconds())
	return err
}

// reader returns the authenticated agent, or a 401 for an anonymous one.
func (m *Module) reader(c echo.Context) (string, error) {
	r, err := m.core.Reader(c)
	if err != nil {
		return "", err
	}
	if r == "" {
		return "", protocol.Errorf(relay.CodeUnauthorized, "triggers and deliveries belong to an agent: authenticate with the D4 Authorization header")
	}
	return r, nil
}

// triggerView is a trigger as the API shows it: Status is "active" or
// "paused".
type triggerView struct {
	*storedTrigger
	Status  string          `json:"status"`
	Enabled bool            `json:"enabled"`
	Spec    json.RawMessage `json:"spec"`
}

func viewOf(t *storedTrigger) triggerView {
	st := "active"
	if t.PausedAt != 0 {
		st = "paused"
	}
	return triggerView{t, st, t.PausedAt == 0, json.RawMessage(t.raw)}
}

func (m *Module) postTrigger(c echo.Context) error {
	owner, err := m.registrant(c)
	if err != nil {
		return err
	}
	body, err := readDoc(c)
	if err != nil {
		return err
	}
	spec, enabled, err := ParseTrigger(body, m.opts.AllowPrivate)
	if err != nil {
		return err
	}
	if spec.Agent != "" && m.manifest(owner, spec.Agent) == nil {
		return protocol.Errorf(CodeUnknownAgent, "agent %q is not one of your agent manifests: POST /manifests first", clip(spec.Agent))
	}
	// The trigger starts where the matcher stands: every event after its
	// cursor, which includes every event stored from now on, is matched
	// with the new trigger among the others.
	m.matchMu.Lock()
	defer m.matchMu.Unlock()
	if len(m.snapshot()) == 0 {
		// The matcher stood idle while no trigger existed: the cursor
		// moves to the log's end first, so the new trigger matches what
		// is stored from now on, as it would behind a busy matcher.
		if _, err := m.skipTo(c.Request().Context(), m.cursor); err != nil {
			return err
		}
	}
	end := m.cursor
	canon, _ := json.Marshal(spec)
	t := &storedTrigger{ID: newID(), Owner: owner, FromSeq: end, CreatedAt: m.core.Now(), Spec: spec, raw: string(canon)}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, x := range m.trigs {
		if x.Owner == owner {
			n++
			if spec.Name != "" && x.Spec.Name == spec.Name {
				return protocol.Errorf(CodeTriggerExists, "you have a trigger named %q (%s): delete it, or PATCH it", clip(spec.Name), x.ID)
			}
		}
	}
	if !enabled {
		t.PausedAt, t.PausedReason = t.CreatedAt, reasonDisabled
	}
	if n >= m.opts.MaxTriggersPerOwner {
		return &httpx.RetryError{Err: protocol.Errorf(CodeTooManyTriggers, "at most %d triggers per agent; delete one first", m.opts.MaxTriggersPerOwner), After: 60}
	}
	if _, err := m.store.db.ExecContext(c.Request().Context(), `INSERT INTO triggers(id, owner, spec, from_seq, created_at, paused_at, paused_reason) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.Owner, t.raw, t.FromSeq, t.CreatedAt, t.PausedAt, t.PausedReason); err != nil {
		return fmt.Errorf("store trigger: %w", err)
	}
	m.trigs[t.ID] = t
	m.ix.Store(newIndex(m.trigs))
	return c.JSON(http.StatusCreated, viewOf(t))
}

func (m *Module) getTriggers(c echo.Context) error {
	owner, err := m.reader(c)
	if err != nil {
		return err
	}
	out := []triggerView{}
	for _, t := range m.snapshot() {
		if t.Owner == owner {
			out = append(out, viewOf(t))
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"triggers": out, "count": len(out)})
}

func (m *Module) deleteTrigger(c echo.Context) error {
	owner, err := m.reader(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.trigs[id]
	if !ok || t.Owner != owner {
		return protocol.Errorf(CodeTriggerNotFound, "no trigger %q of yours", clip(id))
	}
	ctx := c.Request().Context()
	if _, err := m.store.db.ExecContext(ctx, `DELETE FROM triggers WHERE id = ?`, id); err != nil {
		return err
	}
	// Deliveries not yet under way end as dead letters; kept for audit.
	now := m.now()
	if _, err := m.store.db.ExecContext(ctx, `UPDATE deliveries SET status = ?, owner_lease = owner_lease + 1, last_error = 'trigger deleted', updated_at = ?
		WHERE trigger_id = ? AND status IN (?, ?, ?)`, StatusFailed, now, id, StatusPending, StatusEscalated, StatusAwaitingApproval); err != nil {
		return err
	}
	delete(m.trigs, id)
	m.ix.Store(newIndex(m.trigs))
	return c.JSON(http.StatusOK, map[string]any{"id": id, "deleted": true})
}

func (m *Module) getDeliveries(c echo.Context) error {
	v, err := httpx.Params(c, "status", "limit")
	if err != nil {
		return err
	}
	owner, err := m.reader(c)
	if err != nil {
		return err
	}
	status := v.Get("status")
	if status != "" && !contains(Statuses, status) {
		return protocol.Errorf(relay.CodeBadParameter, "status must be one of %v", Statuses)
	}
	limit, err := httpx.IntParam(v, "limit", 100, 1, 500)
	if err != nil {
		return err
	}
	ds, err := m.store.list(c.Request().Context(), owner, status, int(limit))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"deliveries": ds, "count": len(ds)})
}

func (m *Module) writeMetrics(w io.Writer) {
	counts, err := m.store.counts(context.Background())
	if err != nil {
		return
	}
	fmt.Fprintf(w, "# HELP anp2_deliveries Deliveries in the queue, by status.\n# TYPE anp2_deliveries gauge\n")
	for _, s := range Statuses {
		fmt.Fprintf(w, "anp2_deliveries{status=%q} %d\n", s, counts[s])
	}
	m.mu.RLock()
	n := len(m.trigs)
	m.mu.RUnlock()
	fmt.Fprintf(w, "# HELP anp2_triggers Registered triggers.\n# TYPE anp2_triggers gauge\nanp2_triggers %d\n", n)
	fmt.Fprintf(w, "# HELP anp2_deliveries_throttled_total Matches dropped by a throttle.\n# TYPE anp2_deliveries_throttled_total counter\nanp2_deliveries_throttled_total %d\n", m.throttled.Load())
	fmt.Fprintf(w, "# HELP anp2_deliveries_cascade_rejected_total Matches dropped for a triggered_by chain too deep.\n# TYPE anp2_deliveries_cascade_rejected_total counter\nanp2_deliveries_cascade_rejected_total %d\n", m.cascadeRejected.Load())
	fmt.Fprintf(w, "# HELP anp2_triggers_paused_total Triggers paused for their owner's filter budget per event.\n# TYPE anp2_triggers_paused_total counter\nanp2_triggers_paused_total %d\n", m.paused.Load())
	fmt.Fprintf(w, "# HELP anp2_trigger_evaluations_over_budget_total Trigger evaluations passed over or stopped for their owner's filter budget per event.\n# TYPE anp2_trigger_evaluations_over_budget_total counter\nanp2_trigger_evaluations_over_budget_total %d\n", m.overBudget.Load())
	fmt.Fprintf(w, "# HELP anp2_deliveries_deduplicated_total Matches that replaced a waiting delivery by its deduplication key.\n# TYPE anp2_deliveries_deduplicated_total counter\nanp2_deliveries_deduplicated_total %d\n", m.upserts.Load())
	fmt.Fprintf(w, "# HELP anp2_pap_outcome_events_total PAP outcome events stored.\n# TYPE anp2_pap_outcome_events_total counter\nanp2_pap_outcome_events_total %d\n", m.outcomesEmitted.Load())
	fmt.Fprintf(w, "# HELP anp2_pap_outcome_events_dropped_total PAP outcome events dropped over their bounds.\n# TYPE anp2_pap_outcome_events_dropped_total counter\nanp2_pap_outcome_events_dropped_total %d\n", m.outcomesDropped.Load())
	fmt.Fprintf(w, "# HELP anp2_deliveries_stale_outcomes_total Attempt outcomes discarded for a stale lease.\n# TYPE anp2_deliveries_stale_outcomes_total counter\nanp2_deliveries_stale_outcomes_total %d\n", m.staleAcks.Load())
}
