package a2a_test

import (
	"strings"
	"testing"

	"github.com/anp2net/relay/a2a"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks"
)

// projectionTable is §19.5.
var projectionTable = []struct {
	native tasks.Status
	state  a2a.TaskState
}{
	{tasks.StatusPending, a2a.StateSubmitted},
	{tasks.StatusAccepted, a2a.StateWorking},
	{tasks.StatusCompleted, a2a.StateWorking},
	{tasks.StatusVerified, a2a.StateWorking},
	{tasks.StatusPaid, a2a.StateCompleted},
	{tasks.StatusRefunded, a2a.StateFailed},
	{tasks.StatusDisputed, a2a.StateFailed},
	{tasks.StatusTimedOut, a2a.StateFailed},
	{tasks.StatusCancelled, a2a.StateCanceled},
}

func TestProject(t *testing.T) {
	if len(projectionTable) != len(tasks.Statuses) {
		t.Fatalf("table covers %d statuses, tasks has %d", len(projectionTable), len(tasks.Statuses))
	}
	for _, tc := range projectionTable {
		if got := a2a.Project(tc.native); got != tc.state {
			t.Errorf("Project(%s) = %s, want %s", tc.native, got, tc.state)
		}
	}
	if got := a2a.Project("reopened"); got != a2a.StateUnknown {
		t.Errorf("unrecognised status projects to %s, want unknown", got)
	}
}

// TestNativeProjection publishes a real lifecycle for every native status
// and reads each task back through tasks/get, tasks/list (native state
// filter) and message/send's status answer.
func TestNativeProjection(t *testing.T) {
	r := startRelay(t)
	ids := map[tasks.Status]string{}
	for _, tc := range projectionTable {
		evs := lifecycle(t, tc.native)
		r.publish(t, evs...)
		ids[tc.native] = evs[0].ID
	}
	for _, tc := range projectionTable {
		t.Run(string(tc.native), func(t *testing.T) {
			id := ids[tc.native]
			var task a2a.Task
			call(t, r.base, "tasks/get", map[string]any{"id": id}).result(t, &task)
			if task.Kind != "task" || task.ID != id || task.ContextID != id {
				t.Errorf("task ids: %+v", task)
			}
			if task.Status.State != tc.state || task.Metadata["anp2_status"] != string(tc.native) {
				t.Errorf("state %s anp2_status %v, want %s %s", task.Status.State, task.Metadata["anp2_status"], tc.state, tc.native)
			}
			if task.Metadata["anp2_origin"] != "anp2" || task.Metadata["requester"] != requester.ID ||
				task.Metadata["anp2_task_url"] != r.base+"/task/"+id {
				t.Errorf("metadata %v", task.Metadata)
			}
			if len(task.Artifacts) != 1 || task.Artifacts[0].Parts[0].Data["status"] != string(tc.native) {
				t.Errorf("native view artifact %+v", task.Artifacts)
			}
			var list struct{ Tasks []a2a.Task }
			call(t, r.base, "tasks/list", map[string]any{"state": string(tc.native)}).result(t, &list)
			if len(list.Tasks) != 1 || list.Tasks[0].ID != id || list.Tasks[0].Status.State != tc.state {
				t.Errorf("tasks/list state=%s: %+v", tc.native, list.Tasks)
			}
		})
	}
}

// TestNativeHistory proves stateTransitionHistory: tasks/get returns every
// status transition of a native task, oldest first, each naming the event
// that caused it.
func TestNativeHistory(t *testing.T) {
	r := startRelay(t)
	evs := lifecycle(t, tasks.StatusPaid) // request, accept, result, verify, payment
	r.publish(t, evs...)
	var task a2a.Task
	call(t, r.base, "tasks/get", map[string]any{"id": evs[0].ID}).result(t, &task)
	want := []struct {
		status tasks.Status
		state  a2a.TaskState
		event  *protocol.Event
	}{
		{tasks.StatusPending, a2a.StateSubmitted, evs[0]},
		{tasks.StatusAccepted, a2a.StateWorking, evs[1]},
		{tasks.StatusCompleted, a2a.StateWorking, evs[2]},
		{tasks.StatusVerified, a2a.StateWorking, evs[3]},
		{tasks.StatusPaid, a2a.StateCompleted, evs[4]},
	}
	if len(task.History) != len(want) {
		t.Fatalf("history has %d entries, want %d: %+v", len(task.History), len(want), task.History)
	}
	for i, w := range want {
		m := task.History[i]
		d := m.Parts[1].Data
		if m.Role != "agent" || m.Kind != "message" || m.TaskID != evs[0].ID || m.MessageID == "" {
			t.Errorf("entry %d: %+v", i, m)
		}
		if d["anp2_status"] != string(w.status) || d["state"] != string(w.state) || d["event_id"] != w.event.ID ||
			d["at"] != float64(w.event.CreatedAt) {
			t.Errorf("entry %d: data %v, want %s/%s by %s at %d", i, d, w.status, w.state, w.event.ID, w.event.CreatedAt)
		}
		if !strings.HasPrefix(*m.Parts[0].Text, string(w.status)+" at ") {
			t.Errorf("entry %d: text %q", i, *m.Parts[0].Text)
		}
	}
	if d := task.History[3].Parts[1].Data; d["verdict"] != "passed" {
		t.Errorf("verified entry lacks the verdict: %v", d)
	}
	// historyLength keeps the newest entries.
	var short a2a.Task
	call(t, r.base, "tasks/get", map[string]any{"id": evs[0].ID, "historyLength": 2}).result(t, &short)
	if len(short.History) != 2 || short.History[1].Parts[1].Data["anp2_status"] != "paid" {
		t.Errorf("historyLength 2: %+v", short.History)
	}
	// A timed-out task's last transition is a time transition (no event).
	to := lifecycle(t, tasks.StatusTimedOut)
	r.publish(t, to...)
	var timedOut a2a.Task
	call(t, r.base, "tasks/get", map[string]any{"id": to[0].ID}).result(t, &timedOut)
	last := timedOut.History[len(timedOut.History)-1].Parts[1].Data
	if last["anp2_status"] != "timed_out" || last["event_id"] != nil || last["at"] != float64(t0-30) {
		t.Errorf("timed_out transition %v", last)
	}
}

// TestCancelNative: the relay never cancels a native task; the task is
// unchanged afterwards.
func TestCancelNative(t *testing.T) {
	r := startRelay(t)
	evs := lifecycle(t, tasks.StatusPending)
	r.publish(t, evs...)
	rep := call(t, r.base, "tasks/cancel", map[string]any{"id": evs[0].ID})
	checkError(t, rep, a2a.CodeTaskNotCancelable, "1", map[string]any{"cancelable_by_requester": true})
	if how, _ := rep.Error.Data["how"].(string); !strings.Contains(how, "kind 55") || !strings.Contains(how, evs[0].ID) {
		t.Errorf("how: %q", how)
	}
	var task a2a.Task
	call(t, r.base, "tasks/get", map[string]any{"id": evs[0].ID}).result(t, &task)
	if task.Status.State != a2a.StateSubmitted {
		t.Errorf("state after refused cancel: %s", task.Status.State)
	}
}
