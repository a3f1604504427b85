package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anp2net/relay/relay/postgres/pgtest"
)

// TestCoverA2ATasksAcrossProcesses: with two anp2 serve processes over one
// PostgreSQL log, an A2A task made by message/send on one is answered by
// the other: tasks/get returns it, tasks/resubscribe streams it to its
// final frame, and a follow-up message/send naming it is -32004 (a
// completed A2A task), not -32001 (unknown). An id no process made stays
// -32001 on both.
func TestCoverA2ATasksAcrossProcesses(t *testing.T) {
	pg := pgtest.DB(t)
	dir := t.TempDir()
	id := []string{"--relay-key", filepath.Join(dir, "relay.key"), "--rate-agent", "0", "--rate-ip", "0"}
	a, b := startProc(t, pg, id...), startProc(t, pg, id...)

	msg := map[string]any{"message": map[string]any{"kind": "message", "role": "user", "messageId": "m-1",
		"parts": []any{map[string]any{"kind": "text", "text": "how do I publish my first event?"}}}}
	status, body := a2aCall(t, a.base, nil, "message/send", msg)
	var sent struct {
		Result struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"result"`
	}
	if status != 200 || json.Unmarshal(body, &sent) != nil || sent.Result.ID == "" {
		t.Fatalf("message/send on a: %d %s", status, body)
	}
	taskID := sent.Result.ID

	status, body = a2aCall(t, b.base, nil, "tasks/get", map[string]any{"id": taskID})
	var got struct {
		Result struct {
			ID        string `json:"id"`
			Artifacts []any  `json:"artifacts"`
			Status    struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"result"`
	}
	if status != 200 || json.Unmarshal(body, &got) != nil || got.Result.ID != taskID ||
		got.Result.Status.State != sent.Result.Status.State || len(got.Result.Artifacts) == 0 {
		t.Fatalf("tasks/get on b: %d %s", status, body)
	}

	status, body = a2aCall(t, b.base, nil, "tasks/resubscribe", map[string]any{"id": taskID})
	if status != 200 || !strings.Contains(string(body), taskID) || !strings.Contains(string(body), `"final":true`) {
		t.Fatalf("tasks/resubscribe on b: %d %s", status, body)
	}

	follow := map[string]any{"message": map[string]any{"kind": "message", "role": "user", "messageId": "m-2", "taskId": taskID,
		"parts": []any{map[string]any{"kind": "text", "text": "and then?"}}}}
	if _, body = a2aCall(t, b.base, nil, "message/send", follow); a2aErrorCode(t, body) != -32004 {
		t.Fatalf("follow-up message/send on b: %s", body)
	}

	unknown := "0f0e0d0c-0b0a-4908-8706-050403020100"
	for _, r := range []*relayProc{a, b} {
		if _, body = a2aCall(t, r.base, nil, "tasks/get", map[string]any{"id": unknown}); a2aErrorCode(t, body) != -32001 {
			t.Fatalf("tasks/get of an unknown task on %s: %s", r.base, body)
		}
	}
}
