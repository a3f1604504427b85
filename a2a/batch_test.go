package a2a_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/anp2net/relay/a2a"
)

// TestBatch follows JSON-RPC 2.0 §6: one response per request with an id,
// in order; none for notifications; errors per entry.
func TestBatch(t *testing.T) {
	r := startRelay(t)
	body := `[
		{"jsonrpc":"2.0","id":"card","method":"agent/getCard"},
		{"jsonrpc":"2.0","method":"message/send","params":{"message":{"role":"user","messageId":"n1","parts":[{"kind":"text","text":"hi"}]}}},
		1,
		{"jsonrpc":"2.0","id":2,"method":"nope"},
		{"jsonrpc":"2.0","method":"nope"},
		{"jsonrpc":"2.0","id":null,"method":"tasks/get","params":{}},
		{"jsonrpc":"2.0","id":3,"method":"message/stream","params":{"message":{"role":"user","messageId":"s","parts":[{"kind":"text","text":"hi"}]}}},
		{"jsonrpc":"2.0","id":-4.5,"method":"message/send","params":{"message":{"role":"user","messageId":"m","parts":[{"kind":"text","text":"how do I join?"}]}}}
	]`
	ans := post(t, r.base+"/a2a", body)
	if ans.status != http.StatusOK {
		t.Fatalf("HTTP %d", ans.status)
	}
	var reps []reply
	if err := json.Unmarshal(ans.body, &reps); err != nil {
		t.Fatalf("not an array: %s", ans.body)
	}
	wantIDs := []string{`"card"`, "null", "2", "null", "3", "-4.5"}
	if len(reps) != len(wantIDs) {
		t.Fatalf("%d responses, want %d: %s", len(reps), len(wantIDs), ans.body)
	}
	for i, id := range wantIDs {
		if string(reps[i].ID) != id || reps[i].JSONRPC != "2.0" {
			t.Errorf("response %d: id %s jsonrpc %q, want id %s", i, reps[i].ID, reps[i].JSONRPC, id)
		}
	}
	var card a2a.AgentCard
	reps[0].result(t, &card)
	if card.Name == "" {
		t.Error("card result empty")
	}
	checkError(t, reps[1], a2a.CodeInvalidRequest, "null", nil)
	checkError(t, reps[2], a2a.CodeMethodNotFound, "2", nil)
	checkError(t, reps[3], a2a.CodeInvalidParams, "null", nil)
	checkError(t, reps[4], a2a.CodeUnsupportedOperation, "3", nil)
	var task a2a.Task
	reps[5].result(t, &task)
	if task.Status.State != a2a.StateCompleted || task.Metadata["anp2_intent"] != "join" {
		t.Errorf("send in batch: %+v", task)
	}
}

// TestBatchNotificationsOnly: a request with nothing to answer (only
// notifications) is HTTP 204 with no body.
func TestBatchNotificationsOnly(t *testing.T) {
	r := startRelay(t)
	for _, body := range []string{
		`[{"jsonrpc":"2.0","method":"agent/getCard"},{"jsonrpc":"2.0","method":"nope"}]`,
		`{"jsonrpc":"2.0","method":"agent/getCard"}`,
		`{"jsonrpc":"2.0","method":"message/stream","params":{}}`,
	} {
		ans := post(t, r.base+"/a2a", body)
		if ans.status != http.StatusNoContent || len(ans.body) != 0 {
			t.Errorf("%s: HTTP %d body %q, want 204 and nothing", body, ans.status, ans.body)
		}
	}
}

// TestBatchOfOne is still an array.
func TestBatchOfOne(t *testing.T) {
	r := startRelay(t)
	ans := post(t, r.base+"/a2a", `[{"jsonrpc":"2.0","id":1,"method":"agent/getAuthenticatedExtendedCard"}]`)
	var reps []reply
	if err := json.Unmarshal(ans.body, &reps); err != nil || len(reps) != 1 {
		t.Fatalf("%s", ans.body)
	}
	checkError(t, reps[0], a2a.CodeExtendedCardNotConfigured, "1", nil)
}
