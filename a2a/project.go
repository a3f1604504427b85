package a2a

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/anp2net/relay/tasks"
)

// projection is the §19.5 table: native status → A2A state.
var projection = map[tasks.Status]TaskState{
	tasks.StatusPending:   StateSubmitted,
	tasks.StatusAccepted:  StateWorking,
	tasks.StatusCompleted: StateWorking, // result in, not yet verified or paid
	tasks.StatusVerified:  StateWorking, // verdict reached, settlement pending
	tasks.StatusPaid:      StateCompleted,
	tasks.StatusRefunded:  StateFailed,
	tasks.StatusDisputed:  StateFailed,
	tasks.StatusTimedOut:  StateFailed,
	tasks.StatusCancelled: StateCanceled,
}

// Project returns the A2A state of a native status (§19.5); unknown for a
// status the table does not name.
func Project(s tasks.Status) TaskState {
	if st, ok := projection[s]; ok {
		return st
	}
	return StateUnknown
}

// nativeStatuses lists the native statuses that project to st, in the
// table's order.
func nativeStatuses(st TaskState) []tasks.Status {
	var out []tasks.Status
	for _, s := range tasks.Statuses {
		if projection[s] == st {
			out = append(out, s)
		}
	}
	return out
}

// meaning explains each native status in a sentence.
var meaning = map[tasks.Status]string{
	tasks.StatusPending:   "requested (kind 50); no provider has accepted yet",
	tasks.StatusAccepted:  "a provider accepted it (kind 51); no result yet",
	tasks.StatusCompleted: "the provider published a result (kind 52); no neutral verdict yet",
	tasks.StatusVerified:  "neutral verifiers reached a verdict (kind 53); payment pending",
	tasks.StatusPaid:      "the requester released payment (kind 54)",
	tasks.StatusRefunded:  "the requester refunded the task (kind 54, refund)",
	tasks.StatusDisputed:  "the verdicts conflict or no consensus was reached",
	tasks.StatusTimedOut:  "the deadline passed before a counting result",
	tasks.StatusCancelled: "the requester cancelled it (kind 55) before any accept",
}

// nativeTask projects a native task view onto an A2A Task. history < 0
// keeps every transition, 0 none, n the last n. The full native view
// travels as a data artifact when artifacts is true.
func (a *Adapter) nativeTask(v tasks.TaskView, base string, history int, artifacts bool) Task {
	t := Task{
		Kind:      "task",
		ID:        v.TaskID,
		ContextID: v.TaskID,
		Status:    a.nativeStatus(v),
		Metadata:  nativeMeta(v, base),
	}
	msgs := transitionMessages(v)
	if history >= 0 && history < len(msgs) {
		msgs = msgs[len(msgs)-history:]
	}
	t.History = msgs
	if artifacts {
		t.Artifacts = []Artifact{{
			ArtifactID:  "anp2.task." + v.TaskID,
			Name:        "anp2.task",
			Description: "The native task as GET /task/{task_id} serves it; the events themselves are in the log under the ids given.",
			Parts:       []Part{DataPart(viewData(v))},
		}}
	}
	return t
}

func (a *Adapter) nativeStatus(v tasks.TaskView) TaskStatus {
	st := TaskStatus{State: Project(v.Status)}
	if n := len(v.History); n > 0 {
		st.Timestamp = timestamp(time.Unix(v.History[n-1].At, 0))
	}
	text := fmt.Sprintf("ANP2 task %s: %s", v.Status, meaning[v.Status])
	st.Message = &Message{
		Kind: "message", Role: "agent", MessageID: v.TaskID + ".status",
		TaskID: v.TaskID, ContextID: v.TaskID, Parts: []Part{TextPart(text)},
		Metadata: map[string]any{"anp2_status": string(v.Status)},
	}
	return st
}

func nativeMeta(v tasks.TaskView, base string) map[string]any {
	m := map[string]any{
		"anp2_status":   string(v.Status),
		"anp2_origin":   "anp2",
		"anp2_task_url": base + "/task/" + v.TaskID,
		"capability":    v.Capability,
		"requester":     v.Requester,
		"created_at":    v.CreatedAt,
		"deadline_unix": v.Deadline,
		"high_stakes":   v.HighStakes,
	}
	if v.Provider != "" {
		m["provider"] = v.Provider
	}
	if v.Phase != "" {
		m["phase"] = v.Phase
	}
	if v.Consensus.Verdict != "" {
		m["consensus_verdict"] = v.Consensus.Verdict
	}
	return m
}

// transitionMessages turns the native status history into agent messages,
// one per transition, oldest first.
func transitionMessages(v tasks.TaskView) []Message {
	out := make([]Message, 0, len(v.History))
	for i, tr := range v.History {
		out = append(out, transitionMessage(v.TaskID, i, tr))
	}
	return out
}

func transitionMessage(taskID string, i int, tr tasks.Transition) Message {
	data := transitionData(tr)
	text := fmt.Sprintf("%s at %s", tr.Status, time.Unix(tr.At, 0).UTC().Format(time.RFC3339))
	if tr.EventID != "" {
		text += " (event " + tr.EventID + ")"
	} else {
		text += " (time transition)"
	}
	return Message{
		Kind: "message", Role: "agent", MessageID: fmt.Sprintf("%s.%d", taskID, i),
		TaskID: taskID, ContextID: taskID,
		Parts:    []Part{TextPart(text), DataPart(data)},
		Metadata: map[string]any{"anp2_status": string(tr.Status), "a2a_state": string(Project(tr.Status))},
	}
}

func transitionData(tr tasks.Transition) map[string]any {
	d := map[string]any{"anp2_status": string(tr.Status), "state": string(Project(tr.Status)), "at": tr.At}
	if tr.EventID != "" {
		d["event_id"] = tr.EventID
	}
	if tr.Verdict != "" {
		d["verdict"] = tr.Verdict
	}
	return d
}

// viewData is v as a JSON object (the view's own field names).
func viewData(v tasks.TaskView) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return map[string]any{"task_id": v.TaskID}
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return map[string]any{"task_id": v.TaskID}
	}
	return m
}
