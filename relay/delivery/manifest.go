package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

// Codes of the agent manifests (SPEC §16).
const (
	CodeInvalidManifest  = "invalid_manifest"
	CodeManifestNotFound = "manifest_not_found" // 404
	CodeTooManyManifests = "too_many_manifests" // 429
	CodeTriggerExists    = "trigger_exists"     // 409
	CodeUnknownAgent     = "unknown_agent"
	CodeDeliveryNotFound = "delivery_not_found"    // 404
	CodeNotAwaiting      = "not_awaiting_approval" // 409
	maxManifestsPerOwner = 50
	EventCompleted       = "pap.agent.invocation.completed"
	EventFailed          = "pap.agent.invocation.failed"
)

// Risk levels (seed 002 §5), lowest first.
var riskLevels = []string{"read_only", "low", "medium", "high"}

func riskRank(r string) int {
	for i, l := range riskLevels {
		if l == r {
			return i
		}
	}
	return -1
}

// Manifest is an agent manifest (seed 002 §5) as the relay keeps it: the
// fields the relay acts on, and the document's other members (model,
// system_prompt, tools, output) kept as they came.
type Manifest struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
	RiskLevel   string `json:"risk_level"`
	// Target is where its invocations go (the relay's addition: a
	// webhook, or an A2A agent card).
	Target       *Target         `json:"target"`
	Model        json.RawMessage `json:"model,omitempty"`
	SystemPrompt string          `json:"system_prompt,omitempty"`
	Tools        []ManifestTool  `json:"tools,omitempty"`
	Limits       *Limits         `json:"limits,omitempty"`
	Output       json.RawMessage `json:"output,omitempty"`
	OnComplete   *OnOutcome      `json:"on_complete,omitempty"`
	OnFailure    *OnOutcome      `json:"on_failure,omitempty"`

	// risk is the effective risk: the highest of RiskLevel and the
	// tools' risk_override (§5).
	risk string
}

// ManifestTool is one tool of a manifest; only risk_override counts here.
type ManifestTool struct {
	Name         string `json:"name"`
	Source       string `json:"source,omitempty"`
	Description  string `json:"description,omitempty"`
	RiskOverride string `json:"risk_override,omitempty"`
}

// Limits bound an agent's invocations: at most MaxInvocations per
// WindowSeconds (both or neither), each attempt at most
// MaxRuntimeSeconds; MaxToolCalls is the agent's own business (the relay
// runs no tools) and kept as given.
type Limits struct {
	MaxRuntimeSeconds int `json:"max_runtime_seconds,omitempty"`
	MaxToolCalls      int `json:"max_tool_calls,omitempty"`
	MaxInvocations    int `json:"max_invocations,omitempty"`
	WindowSeconds     int `json:"window_seconds,omitempty"`
}

// OnOutcome is on_complete or on_failure: the event to emit, and on
// failure how to retry.
type OnOutcome struct {
	EmitEvent string `json:"emit_event,omitempty"`
	Retry     *struct {
		MaxAttempts    int `json:"max_attempts"`
		BackoffSeconds int `json:"backoff_seconds"`
	} `json:"retry,omitempty"`
}

// Risk is the manifest's effective risk level.
func (mf *Manifest) Risk() string { return mf.risk }

func badManifest(format string, a ...any) error {
	return protocol.Errorf(CodeInvalidManifest, format, a...)
}

// ParseManifest decodes a POST /manifests body: a PAP agent manifest
// document (seed 002 §5; YAML or JSON) whose agent has a target.
func ParseManifest(body []byte, allowHTTP bool, maxAttempts int) (*Manifest, error) {
	js, err := docJSON(body)
	if err != nil {
		return nil, protocol.Errorf(CodeInvalidManifest, "%s", err.Error())
	}
	var d struct {
		PAPVersion string    `json:"pap_version"`
		Agent      *Manifest `json:"agent"`
	}
	if err := strictDecode(js, &d, "agent manifest"); err != nil {
		return nil, protocol.Errorf(CodeInvalidManifest, "%s", err.Error())
	}
	if d.PAPVersion != PAPVersion {
		return nil, badManifest("pap_version must be %q", PAPVersion)
	}
	mf := d.Agent
	if mf == nil {
		return nil, badManifest("an agent manifest document has an agent")
	}
	if !validName(mf.ID) {
		return nil, badManifest("agent.id %q: 1-128 bytes of letters, digits and . _ -", clip(mf.ID))
	}
	if mf.risk = mf.RiskLevel; riskRank(mf.RiskLevel) < 0 {
		return nil, badManifest("risk_level is one of read_only, low, medium, high")
	}
	if len(mf.Tools) > 64 {
		return nil, badManifest("at most 64 tools")
	}
	for _, t := range mf.Tools {
		if t.RiskOverride == "" {
			continue
		}
		if riskRank(t.RiskOverride) < 0 {
			return nil, badManifest("tool %q: risk_override is one of read_only, low, medium, high", clip(t.Name))
		}
		if riskRank(t.RiskOverride) > riskRank(mf.risk) {
			mf.risk = t.RiskOverride
		}
	}
	if mf.Target == nil {
		return nil, badManifest("agent.target is where its invocations go: {\"type\": \"webhook\"|\"a2a\", \"url\"}")
	}
	if err := mf.Target.check(allowHTTP); err != nil {
		if protocol.CodeOf(err) == CodeInvalidTrigger {
			return nil, protocol.Errorf(CodeInvalidManifest, "%s", err.Error())
		}
		return nil, err
	}
	if l := mf.Limits; l != nil {
		if l.MaxRuntimeSeconds < 0 || l.MaxRuntimeSeconds > 3600 || l.MaxToolCalls < 0 || l.MaxInvocations < 0 ||
			(l.MaxInvocations > 0) != (l.WindowSeconds > 0) || l.WindowSeconds < 0 || l.WindowSeconds > 30*86400 {
			return nil, badManifest("limits: max_runtime_seconds 0-3600; max_invocations and window_seconds (1 s - 30 days) together")
		}
	}
	if o := mf.OnComplete; o != nil && (o.EmitEvent != "" && o.EmitEvent != EventCompleted || o.Retry != nil) {
		return nil, badManifest("on_complete.emit_event is %q (or absent); on_complete has no retry", EventCompleted)
	}
	if o := mf.OnFailure; o != nil {
		if o.EmitEvent != "" && o.EmitEvent != EventFailed {
			return nil, badManifest("on_failure.emit_event is %q (or absent)", EventFailed)
		}
		if r := o.Retry; r != nil && (r.MaxAttempts < 1 || r.MaxAttempts > maxAttempts || r.BackoffSeconds < 0 || r.BackoffSeconds > 3600) {
			return nil, badManifest("on_failure.retry: max_attempts 1-%d, backoff_seconds 0-3600", maxAttempts)
		}
	}
	return mf, nil
}

// manifestKey keys the manifests in memory.
func manifestKey(owner, id string) string { return owner + "/" + id }

// manifest returns owner's manifest id, or nil.
func (m *Module) manifest(owner, id string) *Manifest {
	m.mfMu.RLock()
	defer m.mfMu.RUnlock()
	return m.manifests[manifestKey(owner, id)]
}

// loadManifests reads the stored manifests.
func (m *Module) loadManifests(ctx context.Context) error {
	rows, err := m.store.db.QueryContext(ctx, `SELECT owner, id, doc FROM manifests`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var owner, id, doc string
		if err := rows.Scan(&owner, &id, &doc); err != nil {
			return err
		}
		mf, err := ParseManifest([]byte(doc), true, m.opts.MaxAttempts)
		if err != nil {
			return fmt.Errorf("stored manifest %s/%s: %w", owner, id, err)
		}
		m.manifests[manifestKey(owner, id)] = mf
	}
	return rows.Err()
}

// manifestView is a manifest as GET /manifests shows it.
type manifestView struct {
	Owner         string    `json:"owner"`
	EffectiveRisk string    `json:"effective_risk_level"`
	Agent         *Manifest `json:"agent"`
}

func (m *Module) postManifest(c echo.Context) error {
	owner, err := m.registrant(c)
	if err != nil {
		return err
	}
	body, err := readDoc(c)
	if err != nil {
		return err
	}
	mf, err := ParseManifest(body, m.opts.AllowPrivate, m.opts.MaxAttempts)
	if err != nil {
		return err
	}
	canon, _ := json.Marshal(map[string]any{"pap_version": PAPVersion, "agent": mf})
	m.mfWrite.Lock()
	defer m.mfWrite.Unlock()
	key := manifestKey(owner, mf.ID)
	m.mfMu.RLock()
	_, replacing := m.manifests[key]
	n := 0
	for k := range m.manifests {
		if len(k) > len(owner) && k[:len(owner)+1] == owner+"/" {
			n++
		}
	}
	m.mfMu.RUnlock()
	if !replacing {
		if n >= maxManifestsPerOwner {
			return &httpx.RetryError{Err: protocol.Errorf(CodeTooManyManifests, "at most %d agent manifests per agent; delete one first", maxManifestsPerOwner), After: 60}
		}
	}
	// Registering a manifest id again replaces it: its triggers take the
	// new target, risk and limits from their next match on.
	if _, err := m.store.db.ExecContext(c.Request().Context(), `INSERT INTO manifests(owner, id, doc, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT(owner, id) DO UPDATE SET doc = excluded.doc, created_at = excluded.created_at`, owner, mf.ID, string(canon), m.core.Now()); err != nil {
		return fmt.Errorf("store manifest: %w", err)
	}
	m.mfMu.Lock()
	m.manifests[key] = mf
	m.mfMu.Unlock()
	status := http.StatusCreated
	if replacing {
		status = http.StatusOK
	}
	return c.JSON(status, manifestView{Owner: owner, EffectiveRisk: mf.risk, Agent: mf})
}

func (m *Module) getManifests(c echo.Context) error {
	owner, err := m.reader(c)
	if err != nil {
		return err
	}
	out := []manifestView{}
	m.mfMu.RLock()
	for k, mf := range m.manifests {
		if len(k) > len(owner) && k[:len(owner)+1] == owner+"/" {
			out = append(out, manifestView{Owner: owner, EffectiveRisk: mf.risk, Agent: mf})
		}
	}
	m.mfMu.RUnlock()
	slices.SortFunc(out, func(a, b manifestView) int { return strings.Compare(a.Agent.ID, b.Agent.ID) })
	return c.JSON(http.StatusOK, map[string]any{"manifests": out, "count": len(out)})
}

func (m *Module) deleteManifest(c echo.Context) error {
	owner, err := m.reader(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	m.mfWrite.Lock()
	defer m.mfWrite.Unlock()
	key := manifestKey(owner, id)
	if m.manifest(owner, id) == nil {
		return protocol.Errorf(CodeManifestNotFound, "no agent manifest %q of yours", clip(id))
	}
	if _, err := m.store.db.ExecContext(c.Request().Context(), `DELETE FROM manifests WHERE owner = ? AND id = ?`, owner, id); err != nil {
		return err
	}
	m.mfMu.Lock()
	delete(m.manifests, key)
	m.mfMu.Unlock()
	return c.JSON(http.StatusOK, map[string]any{"id": id, "deleted": true})
}

// readDoc reads a document body of at most MaxDocBytes (413 beyond).
func readDoc(c echo.Context) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, MaxDocBytes+1))
	if err != nil {
		return nil, protocol.Errorf(relay.CodeBadParameter, "cannot read body")
	}
	if len(body) > MaxDocBytes {
		return nil, protocol.Errorf(relay.CodeBodyTooLarge, "a trigger or manifest document is at most %d bytes", MaxDocBytes)
	}
	return body, nil
}

// attemptTimeout is the send timeout of an attempt of a delivery whose
// agent is mf (nil: none): the manifest's max_runtime_seconds when set,
// never past the watchdog TTL (the watchdog would take the attempt over).
func (m *Module) attemptTimeout(mf *Manifest) time.Duration {
	if mf != nil && mf.Limits != nil && mf.Limits.MaxRuntimeSeconds > 0 {
		return min(time.Duration(mf.Limits.MaxRuntimeSeconds)*time.Second, m.opts.WatchdogTTL)
	}
	return m.opts.SendTimeout
}
