package a2a_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/anp2net/relay/a2a"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestErrorCodes sends one bad (or refused) request per row and checks the
// JSON-RPC error code, HTTP 200, the echoed id and, where it matters, the
// error data.
func TestErrorCodes(t *testing.T) {
	r := startRelay(t)
	pending := lifecycle(t, tasks.StatusPending)
	accepted := lifecycle(t, tasks.StatusAccepted)
	r.publish(t, pending...)
	r.publish(t, accepted...)
	var a2aTask a2a.Task
	call(t, r.base, "message/send", userMessage("hello")).result(t, &a2aTask)

	msg := func(extra string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"role":"user","messageId":"m1","parts":[{"kind":"text","text":"hi"}]` + extra + `}}}`
	}
	rq := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":"x-1","method":"` + method + `","params":` + params + `}`
	}
	unknown := strings.Repeat("ab", 32)
	huge := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"pad":"` + strings.Repeat("x", 70<<10) + `"}}`
	bigBatch := "[" + strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"agent/getCard"},`, 33), ",") + "]"

	cases := []struct {
		name   string
		body   string
		code   int
		id     string // the id the error must carry
		data   map[string]any
		accept string
	}{
		{"truncated JSON", `{"jsonrpc":"2.0","id":1,`, a2a.CodeParseError, "null", nil, ""},
		{"empty body", ``, a2a.CodeParseError, "null", nil, ""},
		{"not JSON", `hello`, a2a.CodeParseError, "null", nil, ""},
		{"number", `1`, a2a.CodeInvalidRequest, "null", nil, ""},
		{"string", `"x"`, a2a.CodeInvalidRequest, "null", nil, ""},
		{"null", `null`, a2a.CodeInvalidRequest, "null", nil, ""},
		{"wrong version", `{"jsonrpc":"1.0","id":3,"method":"agent/getCard"}`, a2a.CodeInvalidRequest, "3", nil, ""},
		{"no version", `{"id":3,"method":"agent/getCard"}`, a2a.CodeInvalidRequest, "3", nil, ""},
		{"no method", `{"jsonrpc":"2.0","id":"a"}`, a2a.CodeInvalidRequest, `"a"`, nil, ""},
		{"method not a string", `{"jsonrpc":"2.0","id":4,"method":5}`, a2a.CodeInvalidRequest, "4", nil, ""},
		{"id is an object", `{"jsonrpc":"2.0","id":{},"method":"agent/getCard"}`, a2a.CodeInvalidRequest, "null", nil, ""},
		{"id is a boolean", `{"jsonrpc":"2.0","id":true,"method":"agent/getCard"}`, a2a.CodeInvalidRequest, "null", nil, ""},
		{"params a string", `{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":"x"}`, a2a.CodeInvalidRequest, "5", nil, ""},
		{"empty batch", `[]`, a2a.CodeInvalidRequest, "null", nil, ""},
		{"batch too large", bigBatch, a2a.CodeInvalidRequest, "null", map[string]any{"max_batch": 32.0}, ""},
		{"body too large", huge, a2a.CodeInvalidRequest, "null", map[string]any{"max_bytes": float64(64 << 10)}, ""},
		{"unknown method", `{"jsonrpc":"2.0","id":9,"method":"tasks/explode"}`, a2a.CodeMethodNotFound, "9", map[string]any{"method": "tasks/explode"}, ""},
		{"send: no params", `{"jsonrpc":"2.0","id":7,"method":"message/send"}`, a2a.CodeInvalidParams, "7", nil, ""},
		{"send: params array", `{"jsonrpc":"2.0","id":7,"method":"message/send","params":[1]}`, a2a.CodeInvalidParams, "7", nil, ""},
		{"send: message not an object", rq("message/send", `{"message":"hi"}`), a2a.CodeInvalidParams, `"x-1"`, nil, ""},
		{"send: no parts", `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"role":"user","messageId":"m","parts":[]}}}`, a2a.CodeInvalidParams, "7", nil, ""},
		{"send: text part without text", `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"role":"user","messageId":"m","parts":[{"kind":"text"}]}}}`, a2a.CodeInvalidParams, "7", nil, ""},
		{"send: unknown part kind", `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"role":"user","messageId":"m","parts":[{"kind":"video"}]}}}`, a2a.CodeInvalidParams, "7", nil, ""},
		{"send: no messageId", `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"role":"user","parts":[{"kind":"text","text":"hi"}]}}}`, a2a.CodeInvalidParams, "7", nil, ""},
		{"send: bad role", `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"role":"bot","messageId":"m","parts":[{"kind":"text","text":"hi"}]}}}`, a2a.CodeInvalidParams, "7", nil, ""},
		{"send: negative historyLength", msg(`},"configuration":{"historyLength":-1`), a2a.CodeInvalidParams, "7", nil, ""},
		{"get: no id", rq("tasks/get", `{}`), a2a.CodeInvalidParams, `"x-1"`, nil, ""},
		{"get: id a number", rq("tasks/get", `{"id":12}`), a2a.CodeInvalidParams, `"x-1"`, nil, ""},
		{"get: negative historyLength", rq("tasks/get", `{"id":"`+a2aTask.ID+`","historyLength":-2}`), a2a.CodeInvalidParams, `"x-1"`, nil, ""},
		{"list: unknown param", rq("tasks/list", `{"capabilty":"x"}`), a2a.CodeInvalidParams, `"x-1"`, nil, ""},
		{"list: limit 0", rq("tasks/list", `{"limit":0}`), a2a.CodeInvalidParams, `"x-1"`, nil, ""},
		{"list: limit 201", rq("tasks/list", `{"limit":201}`), a2a.CodeInvalidParams, `"x-1"`, nil, ""},
		{"list: limit a string", rq("tasks/list", `{"limit":"5"}`), a2a.CodeInvalidParams, `"x-1"`, nil, ""},
		{"list: spellings disagree", rq("tasks/list", `{"limit":5,"page_size":6}`), a2a.CodeInvalidParams, `"x-1"`, nil, ""},
		{"list: bogus state", rq("tasks/list", `{"state":"finished"}`), a2a.CodeInvalidParams, `"x-1"`, nil, ""},
		{"list: state and status", rq("tasks/list", `{"state":"pending","status":"submitted"}`), a2a.CodeInvalidParams, `"x-1"`, nil, ""},
		{"list: forged token", rq("tasks/list", `{"page_token":"b2Zmc2V0OjU"}`), a2a.CodeInvalidParams, `"x-1"`, nil, ""},
		{"list: requester not hex", rq("tasks/list", `{"requester":"bob"}`), a2a.CodeInvalidParams, `"x-1"`, nil, ""},
		{"list: last_updated_after", rq("tasks/list", `{"last_updated_after":"2026-01-01T00:00:00Z"}`), a2a.CodeInvalidParams, `"x-1"`, nil, ""},
		{"get: unknown task", rq("tasks/get", `{"id":"`+unknown+`"}`), a2a.CodeTaskNotFound, `"x-1"`, map[string]any{"id": unknown}, ""},
		{"get: unknown uuid", rq("tasks/get", `{"id":"00000000-0000-4000-8000-000000000000"}`), a2a.CodeTaskNotFound, `"x-1"`, nil, ""},
		{"cancel: unknown task", rq("tasks/cancel", `{"id":"`+unknown+`"}`), a2a.CodeTaskNotFound, `"x-1"`, nil, ""},
		{"send: unknown taskId", msg(`,"taskId":"` + unknown + `"`), a2a.CodeTaskNotFound, "7", nil, ""},
		{"resubscribe: unknown task", rq("tasks/resubscribe", `{"id":"`+unknown+`"}`), a2a.CodeTaskNotFound, `"x-1"`, nil, ""},
		{"cancel: A2A task", rq("tasks/cancel", `{"id":"`+a2aTask.ID+`"}`), a2a.CodeTaskNotCancelable, `"x-1"`, map[string]any{"state": "completed"}, ""},
		{"cancel: native pending", rq("tasks/cancel", `{"id":"`+pending[0].ID+`"}`), a2a.CodeTaskNotCancelable, `"x-1"`,
			map[string]any{"anp2_status": "pending", "state": "submitted", "cancelable_by_requester": true, "requester": requester.ID}, ""},
		{"cancel: native accepted", rq("tasks/cancel", `{"id":"`+accepted[0].ID+`"}`), a2a.CodeTaskNotCancelable, `"x-1"`,
			map[string]any{"anp2_status": "accepted", "state": "working", "cancelable_by_requester": false}, ""},
		{"push config set", rq("tasks/pushNotificationConfig/set", `{"taskId":"`+a2aTask.ID+`","pushNotificationConfig":{"url":"https://example.com/hook"}}`), a2a.CodePushNotSupported, `"x-1"`, nil, ""},
		{"push config get", rq("tasks/pushNotificationConfig/get", `{"id":"`+a2aTask.ID+`"}`), a2a.CodePushNotSupported, `"x-1"`, nil, ""},
		{"send with push config", msg(`},"configuration":{"pushNotificationConfig":{"url":"https://example.com/hook"}`), a2a.CodePushNotSupported, "7", nil, ""},
		{"send to a completed A2A task", msg(`,"taskId":"` + a2aTask.ID + `"`), a2a.CodeUnsupportedOperation, "7", map[string]any{"state": "completed"}, ""},
		{"output modes", msg(`},"configuration":{"acceptedOutputModes":["image/png"]`), a2a.CodeContentTypeNotSupported, "7", nil, ""},
		{"extended card", `{"jsonrpc":"2.0","id":0,"method":"agent/getAuthenticatedExtendedCard"}`, a2a.CodeExtendedCardNotConfigured, "0", nil, ""},
		{"stream: bad params, SSE", `{"jsonrpc":"2.0","id":8,"method":"message/stream","params":{}}`, a2a.CodeInvalidParams, "8", nil, "text/event-stream"},
		{"resubscribe: unknown, SSE", rq("tasks/resubscribe", `{"id":"`+unknown+`"}`), a2a.CodeTaskNotFound, `"x-1"`, nil, "text/event-stream"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/a2a", "/api/a2a"} {
				var hdr []string
				if tc.accept != "" {
					hdr = []string{"Accept", tc.accept}
				}
				ans := post(t, r.base+path, tc.body, hdr...)
				if tc.accept != "" {
					ans.body = sseData(t, ans)
				}
				rep := ans.reply(t)
				checkError(t, rep, tc.code, tc.id, tc.data)
			}
		})
	}
}

// sseData returns the single data frame of an SSE answer.
func sseData(t *testing.T, a rpcAnswer) []byte {
	t.Helper()
	if ct := a.header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q, want text/event-stream", ct)
	}
	var frames []string
	for _, line := range strings.Split(string(a.body), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			frames = append(frames, d)
		}
	}
	if len(frames) != 1 {
		t.Fatalf("%d frames, want 1: %s", len(frames), a.body)
	}
	return []byte(frames[0])
}

func checkError(t *testing.T, rep reply, code int, id string, data map[string]any) {
	t.Helper()
	if rep.Error == nil {
		t.Fatalf("no error; result %s", rep.Result)
	}
	if rep.Error.Code != code {
		t.Fatalf("code %d (%s %v), want %d", rep.Error.Code, rep.Error.Message, rep.Error.Data, code)
	}
	if rep.Error.Message == "" {
		t.Error("empty message")
	}
	if rep.Result != nil {
		t.Errorf("result beside error: %s", rep.Result)
	}
	if string(rep.ID) != id {
		t.Errorf("id %s, want %s", rep.ID, id)
	}
	for k, want := range data {
		if got := rep.Error.Data[k]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("data[%s] = %v, want %v", k, got, want)
		}
	}
}

// TestInternalError: a failing task source is answered -32603 with HTTP 200,
// and nothing of the failure leaks.
func TestInternalError(t *testing.T) {
	base := unitServer(t, a2a.Options{Tasks: fakeTasks{panic: true}, Logger: quiet})
	id := taskstest.NewAgent("x").ID
	for _, tc := range []struct{ method, params string }{
		{"tasks/get", `{"id":"` + id + `"}`},
		{"tasks/list", `{}`},
		{"tasks/cancel", `{"id":"` + id + `"}`},
	} {
		ans := post(t, base+"/a2a", `{"jsonrpc":"2.0","id":1,"method":"`+tc.method+`","params":`+tc.params+`}`)
		rep := ans.reply(t)
		checkError(t, rep, a2a.CodeInternalError, "1", nil)
		if strings.Contains(string(ans.body), "fake task source") {
			t.Errorf("%s: internal detail leaked: %s", tc.method, ans.body)
		}
	}
	// Other requests in the same batch are unaffected.
	ans := post(t, base+"/a2a", `[{"jsonrpc":"2.0","id":1,"method":"tasks/list"},{"jsonrpc":"2.0","id":2,"method":"agent/getCard"}]`)
	var reps []reply
	if err := json.Unmarshal(ans.body, &reps); err != nil || len(reps) != 2 {
		t.Fatalf("batch: %s", ans.body)
	}
	checkError(t, reps[0], a2a.CodeInternalError, "1", nil)
	if reps[1].Error != nil || reps[1].Result == nil {
		t.Errorf("getCard beside a failing call: %+v", reps[1])
	}
	if ans.status != http.StatusOK {
		t.Errorf("HTTP %d", ans.status)
	}
}
