package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/anp2net/relay/tasks"
)

// Methods lists the JSON-RPC methods the adapter implements.
var Methods = []string{
	"message/send", "message/stream", "tasks/get", "tasks/list", "tasks/cancel", "tasks/resubscribe",
	"tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/get",
	"tasks/pushNotificationConfig/list", "tasks/pushNotificationConfig/delete",
	"agent/getCard", "agent/getAuthenticatedExtendedCard",
}

func streaming(method string) bool {
	return method == "message/stream" || method == "tasks/resubscribe"
}

// dispatch runs a non-streaming method.
func (a *Adapter) dispatch(ctx context.Context, req request, base string) (any, *Error) {
	switch req.Method {
	case "message/send":
		return a.messageSend(req.Params, base)
	case "tasks/get":
		return a.tasksGet(req.Params, base)
	case "tasks/list":
		return a.tasksList(req.Params, base)
	case "tasks/cancel":
		return a.tasksCancel(req.Params)
	case "tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/get",
		"tasks/pushNotificationConfig/list", "tasks/pushNotificationConfig/delete":
		if a.opts.Push != nil {
			return a.pushMethod(ctx, req.Method, req.Params)
		}
		return nil, rpcError(CodePushNotSupported, "this relay dials no webhooks (capabilities.pushNotifications is false); "+
			"follow a task over SSE with message/stream or tasks/resubscribe instead")
	case "agent/getCard":
		return a.card(base), nil
	case "agent/getAuthenticatedExtendedCard":
		return nil, rpcError(CodeExtendedCardNotConfigured, "this relay has no authenticated extended card; the public card is complete")
	}
	return nil, rpcError(CodeMethodNotFound, "", "method", req.Method, "supported", Methods)
}

// sendParams are MessageSendParams.
type sendParams struct {
	Message       *Message       `json:"message"`
	Configuration *sendConfig    `json:"configuration"`
	Metadata      map[string]any `json:"metadata"`
}

type sendConfig struct {
	AcceptedOutputModes    []string        `json:"acceptedOutputModes"`
	HistoryLength          *int            `json:"historyLength"`
	PushNotificationConfig json.RawMessage `json:"pushNotificationConfig"`
	Blocking               *bool           `json:"blocking"`
}

// parseSend decodes and checks message/send (and message/stream) params.
func parseSend(raw json.RawMessage) (sendParams, modes, *Error) {
	var p sendParams
	if err := decodeParams(raw, &p); err != nil {
		return p, modes{}, err
	}
	if err := checkMessage(p.Message); err != nil {
		return p, modes{}, err
	}
	cfg := p.Configuration
	if cfg == nil {
		cfg = &sendConfig{}
	}
	if len(cfg.PushNotificationConfig) > 0 && string(cfg.PushNotificationConfig) != "null" {
		return p, modes{}, rpcError(CodePushNotSupported, "omit configuration.pushNotificationConfig: the tasks message/send creates "+
			"are complete when it answers; follow a task with tasks/pushNotificationConfig/set (when the card says pushNotifications), "+
			"message/stream or tasks/resubscribe")
	}
	if cfg.HistoryLength != nil && *cfg.HistoryLength < 0 {
		return p, modes{}, invalidParams("configuration.historyLength must not be negative")
	}
	m, err := outputModes(cfg.AcceptedOutputModes)
	return p, m, err
}

func checkMessage(m *Message) *Error {
	switch {
	case m == nil:
		return invalidParams("params.message is required")
	case m.Kind != "" && m.Kind != "message":
		return invalidParams(`message.kind must be "message"`)
	case m.Role != "user" && m.Role != "agent":
		return invalidParams(`message.role must be "user" or "agent"`)
	case m.MessageID == "":
		return invalidParams("message.messageId is required")
	case len(m.Parts) == 0:
		return invalidParams("message.parts must hold at least one part")
	}
	for i, p := range m.Parts {
		ok := p.Kind == "text" && p.Text != nil || p.Kind == "data" && p.Data != nil || p.Kind == "file" && p.File != nil
		if !ok {
			return invalidParams(`message.parts[%d] must be {"kind":"text","text":…}, {"kind":"data","data":{…}} or {"kind":"file","file":{…}}`, i)
		}
	}
	return nil
}

// modes says which artifact parts the caller accepts.
type modes struct{ text, json bool }

// outputModes reads acceptedOutputModes: none listed accepts both the text
// and the JSON part; a list naming neither is -32005.
func outputModes(accepted []string) (modes, *Error) {
	if len(accepted) == 0 {
		return modes{text: true, json: true}, nil
	}
	var m modes
	for _, mode := range accepted {
		mt, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(mode)), ";")
		switch strings.TrimSpace(mt) {
		case "*/*":
			m.text, m.json = true, true
		case "text/plain", "text/*", "text":
			m.text = true
		case "application/json", "application/*", "json":
			m.json = true
		}
	}
	if !m.text && !m.json {
		return m, rpcError(CodeContentTypeNotSupported, "the answer is text/plain and application/json",
			"supported", []string{modeText, modeJSON})
	}
	return m, nil
}

func messageText(m *Message) string {
	var parts []string
	for _, p := range m.Parts {
		if p.Kind == "text" && p.Text != nil {
			parts = append(parts, *p.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (a *Adapter) messageSend(raw json.RawMessage, base string) (any, *Error) {
	p, md, err := parseSend(raw)
	if err != nil {
		return nil, err
	}
	history := historyLimit(p.Configuration)
	if id := p.Message.TaskID; id != "" {
		v, err := a.existingTask(id)
		if err != nil {
			return nil, err
		}
		return a.nativeTask(v, base, history, true), nil
	}
	t := a.onboard(p.Message, md, base)
	a.store.put(t)
	return trimHistory(t, history), nil
}

// existingTask resolves the taskId of a message: a native task can be
// observed, an A2A task is already completed, anything else is unknown.
func (a *Adapter) existingTask(id string) (tasks.TaskView, *Error) {
	if v, ok := a.lookupNative(id); ok {
		return v, nil
	}
	if t, ok := a.store.get(id); ok {
		return tasks.TaskView{}, rpcError(CodeUnsupportedOperation, fmt.Sprintf("task %s is %s: A2A tasks of this relay "+
			"complete inside message/send and take no further messages; send a new message without taskId "+
			"(the same contextId is fine)", id, t.Status.State), "state", string(t.Status.State))
	}
	return tasks.TaskView{}, rpcError(CodeTaskNotFound, "no A2A task and no native kind-50 task has this id", "id", id)
}

func historyLimit(cfg *sendConfig) int {
	if cfg == nil || cfg.HistoryLength == nil {
		return -1
	}
	return *cfg.HistoryLength
}

// trimHistory keeps the last n history messages of t (all when n < 0).
func trimHistory(t Task, n int) Task {
	if n >= 0 && n < len(t.History) {
		t.History = t.History[len(t.History)-n:]
	}
	if len(t.History) == 0 {
		t.History = nil
	}
	return t
}

// onboard answers m with a completed A2A task carrying the onboarding
// artifact.
func (a *Adapter) onboard(m *Message, md modes, base string) Task {
	id := newID()
	ctxID := m.ContextID
	if ctxID == "" {
		ctxID = newID()
	}
	c := Classify(messageText(m))
	ans := a.answerFor(c, base)
	user := *m
	user.Kind, user.TaskID, user.ContextID = "message", id, ctxID
	reply := Message{
		Kind: "message", Role: "agent", MessageID: newID(), TaskID: id, ContextID: ctxID,
		Parts: []Part{TextPart(ans.Text)}, Metadata: map[string]any{"anp2_intent": c.Intent},
	}
	var parts []Part
	if md.text {
		parts = append(parts, TextPart(ans.Text))
	}
	if md.json {
		parts = append(parts, DataPart(ans.Data))
	}
	return Task{
		Kind: "task", ID: id, ContextID: ctxID,
		Status:  TaskStatus{State: StateCompleted, Message: &reply, Timestamp: timestamp(a.now())},
		History: []Message{user, reply},
		Artifacts: []Artifact{{
			ArtifactID: id + ".onboarding", Name: "anp2.onboarding",
			Description: "Deterministic ANP2 onboarding answer, chosen by keyword rules (intent " + c.Intent + ")",
			Parts:       parts,
		}},
		Metadata: map[string]any{"anp2_origin": "a2a", "anp2_intent": c.Intent},
	}
}

// taskQuery are TaskQueryParams (tasks/get) and TaskIdParams (tasks/cancel,
// tasks/resubscribe).
type taskQuery struct {
	ID            *string        `json:"id"`
	HistoryLength *int           `json:"historyLength"`
	Metadata      map[string]any `json:"metadata"`
}

// parseBranch reads tasks/get's branch param: params.branch or
// params.metadata.branch ("" the relay's preferred branch, SPEC §17.5).
func parseBranch(raw json.RawMessage) (string, *Error) {
	var q struct {
		Branch   *string        `json:"branch"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := decodeParams(raw, &q); err != nil {
		return "", err
	}
	return branchOf(q.Branch, q.Metadata)
}

func parseQuery(raw json.RawMessage) (string, int, *Error) {
	var q taskQuery
	if err := decodeParams(raw, &q); err != nil {
		return "", 0, err
	}
	if q.ID == nil || *q.ID == "" {
		return "", 0, invalidParams("params.id (the task id) is required")
	}
	if q.HistoryLength != nil && *q.HistoryLength < 0 {
		return "", 0, invalidParams("params.historyLength must not be negative")
	}
	h := -1
	if q.HistoryLength != nil {
		h = *q.HistoryLength
	}
	return *q.ID, h, nil
}

func (a *Adapter) tasksGet(raw json.RawMessage, base string) (any, *Error) {
	id, history, err := parseQuery(raw)
	if err != nil {
		return nil, err
	}
	branch, err := parseBranch(raw)
	if err != nil {
		return nil, err
	}
	src, err := a.source(branch)
	if err != nil {
		return nil, err
	}
	if t, ok := a.store.get(id); ok {
		return trimHistory(t, history), nil
	}
	if v, ok := lookupIn(src, id); ok {
		return a.nativeTask(v, base, history, true), nil
	}
	return nil, rpcError(CodeTaskNotFound, "no A2A task and no native kind-50 task has this id", "id", id)
}

func (a *Adapter) tasksCancel(raw json.RawMessage) (any, *Error) {
	id, _, err := parseQuery(raw)
	if err != nil {
		return nil, err
	}
	if t, ok := a.store.get(id); ok {
		return nil, rpcError(CodeTaskNotCancelable, "A2A tasks of this relay complete inside message/send, so they are already terminal",
			"state", string(t.Status.State))
	}
	v, ok := a.lookupNative(id)
	if !ok {
		return nil, rpcError(CodeTaskNotFound, "no A2A task and no native kind-50 task has this id", "id", id)
	}
	return nil, nativeCancelError(v)
}

// nativeCancelError explains why the relay cannot cancel a native task and
// what its requester can do.
func nativeCancelError(v tasks.TaskView) *Error {
	pending := v.Status == tasks.StatusPending
	detail := "a native ANP2 task is cancelled only by its requester publishing a signed kind 55 (task.cancel); " +
		"the relay cannot sign for anyone"
	how := fmt.Sprintf(`the requester %s publishes kind 55 with content {"task_id":"%s","reason":"…"} and tags `+
		`[["e","%s","root"],["e","%s","cancel"],["t","%s"]]`, v.Requester, v.TaskID, v.TaskID, v.TaskID, v.Capability)
	if !pending {
		how = "a kind 55 counts only before any kind 51 accept; this task is " + string(v.Status) +
			", so it can no longer be cancelled (the requester may post a kind 53 verdict failed or a kind 54 refund)"
	}
	return rpcError(CodeTaskNotCancelable, detail, "anp2_status", string(v.Status), "state", string(Project(v.Status)),
		"requester", v.Requester, "cancelable_by_requester", pending, "how", how)
}
