package a2a_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/a2a"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/labstack/echo/v4"
)

const frameWait = 5 * time.Second

// streamBody is a message/stream request for a message with taskId.
func streamBody(taskID string) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "s-1", "method": "message/stream", "params": map[string]any{
		"message": map[string]any{"role": "user", "messageId": "w", "taskId": taskID,
			"parts": []any{map[string]any{"kind": "text", "text": "watch"}}}}})
	return string(b)
}

// statusUpdate decodes a status-update frame.
func statusUpdate(t *testing.T, r reply) a2a.StatusUpdate {
	t.Helper()
	var u a2a.StatusUpdate
	r.result(t, &u)
	if u.Kind != "status-update" {
		t.Fatalf("frame kind %q: %s", u.Kind, r.Result)
	}
	return u
}

// TestStreamNative proves streaming for a native task: message/stream with
// the task's id sends a snapshot, then one status-update per transition as
// signed events arrive, the last one final.
func TestStreamNative(t *testing.T) {
	r := startRelay(t)
	req := request(t, t0-60, t0+3600)
	r.publish(t, req)
	frames, hdr := openStream(t, r.base+"/a2a", streamBody(req.ID))
	if ct := hdr.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	first, _ := next(t, frames, frameWait)
	if string(first.ID) != `"s-1"` {
		t.Errorf("frame id %s", first.ID)
	}
	var snap a2a.Task
	first.result(t, &snap)
	if snap.Kind != "task" || snap.ID != req.ID || snap.Status.State != a2a.StateSubmitted || len(snap.History) != 1 {
		t.Fatalf("snapshot %+v", snap)
	}

	steps := []struct {
		events []*protocol.Event
		want   []tasks.Status
	}{
		{[]*protocol.Event{taskstest.Accept(provider, t0-50, req)}, []tasks.Status{tasks.StatusAccepted}},
		{[]*protocol.Event{taskstest.Result(provider, t0-40, req), taskstest.Verify(verifier1, t0-30, req, protocol.VerdictPassed, 1)},
			[]tasks.Status{tasks.StatusCompleted, tasks.StatusVerified}},
		{[]*protocol.Event{taskstest.Payment(requester, t0-20, req, protocol.DispositionRelease, protocol.PaymentANP2Credit)},
			[]tasks.Status{tasks.StatusPaid}},
	}
	index := 1
	for _, s := range steps {
		r.publish(t, s.events...)
		for _, want := range s.want {
			fr, ok := next(t, frames, frameWait)
			if !ok {
				t.Fatalf("stream closed before %s", want)
			}
			u := statusUpdate(t, fr)
			final := want == tasks.StatusPaid
			if u.TaskID != req.ID || u.ContextID != req.ID || u.Final != final ||
				u.Status.State != a2a.Project(want) || u.Metadata["anp2_status"] != string(want) ||
				u.Metadata["transition"] != float64(index) || u.Status.Message == nil {
				t.Errorf("frame for %s: %+v", want, u)
			}
			index++
		}
	}
	if fr, ok := <-frames; ok {
		t.Errorf("frame after the final one: %+v", fr)
	}
}

// TestStreamTimeout: a task that times out while watched ends the stream
// with a final failed frame dated at the deadline, caused by no event.
func TestStreamTimeout(t *testing.T) {
	r := startRelay(t)
	req := request(t, t0-60, t0+30)
	r.publish(t, req)
	frames, _ := openStream(t, r.base+"/api/a2a", `{"jsonrpc":"2.0","id":2,"method":"tasks/resubscribe","params":{"id":"`+req.ID+`"}}`)
	var snap a2a.Task
	fr, _ := next(t, frames, frameWait)
	fr.result(t, &snap)
	if snap.Status.State != a2a.StateSubmitted {
		t.Fatalf("snapshot %+v", snap)
	}
	r.clock.add(time.Minute)
	fr, _ = next(t, frames, frameWait)
	u := statusUpdate(t, fr)
	if !u.Final || u.Status.State != a2a.StateFailed || u.Metadata["anp2_status"] != "timed_out" ||
		u.Metadata["event_id"] != nil || u.Status.Timestamp != time.Unix(t0+30, 0).UTC().Format(time.RFC3339) {
		t.Errorf("timeout frame %+v", u)
	}
	if _, ok := <-frames; ok {
		t.Error("stream still open after the final frame")
	}
}

// TestStreamTerminal: following a task that has already ended sends the
// snapshot and one final frame.
func TestStreamTerminal(t *testing.T) {
	r := startRelay(t)
	evs := lifecycle(t, tasks.StatusCancelled)
	r.publish(t, evs...)
	frames, _ := openStream(t, r.base+"/a2a", streamBody(evs[0].ID))
	var got []reply
	for fr := range frames {
		got = append(got, fr)
	}
	if len(got) != 2 {
		t.Fatalf("%d frames, want 2", len(got))
	}
	var snap a2a.Task
	got[0].result(t, &snap)
	u := statusUpdate(t, got[1])
	if snap.Status.State != a2a.StateCanceled || !u.Final || u.Status.State != a2a.StateCanceled || u.Metadata["anp2_status"] != "cancelled" {
		t.Errorf("snapshot %+v final %+v", snap.Status, u)
	}
}

// TestStreamOnboarding: message/stream without taskId streams the A2A task
// as it unfolds (working, artifact, completed), and tasks/get then returns
// the same completed task.
func TestStreamOnboarding(t *testing.T) {
	r := startRelay(t)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 5, "method": "message/stream", "params": userMessage("how do I join?")})
	frames, _ := openStream(t, r.base+"/a2a", string(b))
	var got []reply
	for fr := range frames {
		got = append(got, fr)
	}
	if len(got) != 3 {
		t.Fatalf("%d frames, want 3", len(got))
	}
	var first a2a.Task
	got[0].result(t, &first)
	var art a2a.ArtifactUpdate
	got[1].result(t, &art)
	last := statusUpdate(t, got[2])
	if first.Status.State != a2a.StateWorking || len(first.History) != 1 || first.History[0].Role != "user" || first.Artifacts != nil {
		t.Errorf("first frame %+v", first)
	}
	if art.Kind != "artifact-update" || art.TaskID != first.ID || !art.LastChunk || art.Artifact.Parts[1].Data["intent"] != "join" {
		t.Errorf("artifact frame %+v", art)
	}
	if !last.Final || last.Status.State != a2a.StateCompleted || last.TaskID != first.ID || last.Status.Message == nil {
		t.Errorf("last frame %+v", last)
	}
	var stored a2a.Task
	call(t, r.base, "tasks/get", map[string]any{"id": first.ID}).result(t, &stored)
	if stored.Status.State != a2a.StateCompleted || !reflect.DeepEqual(stored.Artifacts, []a2a.Artifact{art.Artifact}) {
		t.Errorf("stored task %+v", stored)
	}
	// Resubscribing to it replays the completed task and a final frame.
	frames, _ = openStream(t, r.base+"/a2a", `{"jsonrpc":"2.0","id":6,"method":"tasks/resubscribe","params":{"id":"`+first.ID+`"}}`)
	got = got[:0]
	for fr := range frames {
		got = append(got, fr)
	}
	if len(got) != 2 || !statusUpdate(t, got[1]).Final {
		t.Errorf("resubscribe: %d frames", len(got))
	}
}

// TestStreamLimit: a stream of a task that never ends sends keep-alive
// comments and closes after MaxStream without a final frame.
func TestStreamLimit(t *testing.T) {
	id := taskstest.NewAgent("limit").ID
	views := map[string]tasks.TaskView{id: {TaskID: id, Status: tasks.StatusAccepted, CreatedAt: t0,
		History: []tasks.Transition{{Status: tasks.StatusPending, At: t0}, {Status: tasks.StatusAccepted, At: t0 + 1}}}}
	base := unitServer(t, a2a.Options{Tasks: fakeTasks{views: views}, MaxStream: 400 * time.Millisecond,
		KeepAlive: 100 * time.Millisecond, PollInterval: 50 * time.Millisecond, Logger: quiet})
	start := time.Now()
	resp, err := http.Post(base+"/a2a", "application/json", strings.NewReader(streamBody(id)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stream lasted %v", d)
	}
	s := string(body)
	if strings.Count(s, "data: ") != 1 || !strings.Contains(s, ": keep-alive") || !strings.Contains(s, "tasks/resubscribe") ||
		strings.Contains(s, `"final":true`) {
		t.Errorf("stream body:\n%s", s)
	}
}

// TestStreamClose: Close ends open streams at once, without a final frame.
func TestStreamClose(t *testing.T) {
	id := taskstest.NewAgent("close").ID
	views := map[string]tasks.TaskView{id: {TaskID: id, Status: tasks.StatusPending, CreatedAt: t0,
		History: []tasks.Transition{{Status: tasks.StatusPending, At: t0}}}}
	ad := a2a.New(a2a.Options{Tasks: fakeTasks{views: views}, Logger: quiet})
	e := echo.New()
	ad.Mount(func(method, path string, h echo.HandlerFunc) { e.Add(method, path, h) })
	ts := httptest.NewServer(e)
	defer ts.Close()
	frames, _ := openStream(t, ts.URL+"/a2a", streamBody(id))
	if fr, _ := next(t, frames, frameWait); fr.Error != nil {
		t.Fatalf("snapshot: %+v", fr.Error)
	}
	ad.Close()
	select {
	case fr, ok := <-frames:
		if ok {
			t.Errorf("frame after Close: %+v", fr)
		}
	case <-time.After(frameWait):
		t.Fatal("stream still open after Close")
	}
}
