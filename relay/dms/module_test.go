package dms_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/dms"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/stream"
	"github.com/anp2net/relay/tasks/taskstest"
)

const vectorTime = relaytest.VectorTime

func startRelay(t *testing.T) *relaytest.Relay {
	return relaytest.Start(t, []relay.Module{dms.NewModule(), stream.NewModule(), directory.NewModule()})
}

// seal returns a signed kind 3 from a to b.
func seal(t *testing.T, from taskstest.Agent, to string, text string, at int64) *protocol.Event {
	t.Helper()
	e, err := client.SealDM(from.Key, to, []byte(text), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.CreatedAt = at
	e.Sign(from.Key)
	return e
}

func events(t *testing.T, a relaytest.Answer) []*protocol.Event {
	t.Helper()
	if a.Status != 200 {
		t.Fatalf("answer %d %s", a.Status, a.Body)
	}
	var evs []*protocol.Event
	if err := json.Unmarshal(a.Body, &evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestDMRoundTrip: A sends to B through a real relay; B reads its inbox
// from /events and /stream and opens it; A reads its outbox from /dms with
// its own authorization and opens it too; B and anonymous readers of A's
// outbox get 403 and 401.
func TestDMRoundTrip(t *testing.T) {
	r := startRelay(t)
	ag := taskstest.Pool(3)
	a, b, c := ag[0], ag[1], ag[2]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	inboxPath := "/stream?kinds=3&p=" + b.ID
	req, _ := http.NewRequestWithContext(ctx, "GET", r.URL+inboxPath, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", err, resp)
	}
	defer resp.Body.Close()

	first := seal(t, a, b.ID, "meet at noon", vectorTime-30)
	other := seal(t, a, c.ID, "not for b", vectorTime-20)
	second := seal(t, a, b.ID, strings.Repeat("long ", 2000), vectorTime-10)
	reply := seal(t, b, a.ID, "ok", vectorTime-5)
	r.PostAll(t, []*protocol.Event{first, other, second, reply}, 1)

	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data:") {
	}
	var streamed protocol.Event
	if err := json.Unmarshal([]byte(strings.TrimPrefix(sc.Text(), "data:")), &streamed); err != nil || streamed.ID != first.ID {
		t.Fatalf("stream gave %q: %v", sc.Text(), err)
	}

	inbox := events(t, r.Do(t, "GET", "/events?kinds=3&p="+b.ID, "", nil))
	if len(inbox) != 2 || inbox[0].ID != second.ID || inbox[1].ID != first.ID {
		t.Fatalf("inbox: %d events", len(inbox))
	}
	for i, want := range []string{strings.Repeat("long ", 2000), "meet at noon"} {
		if pt, err := client.OpenDM(b.Key, inbox[i]); err != nil || string(pt) != want {
			t.Fatalf("B opens %d: %v", i, err)
		}
	}
	if _, err := client.OpenDM(c.Key, inbox[0]); err == nil {
		t.Fatal("a third agent opened B's message")
	}

	path := "/dms/" + a.ID
	out := events(t, r.Do(t, "GET", path, "", nil, "Authorization", r.Auth(a.Key, "GET", path, vectorTime)))
	if len(out) != 3 || out[0].ID != second.ID || out[1].ID != other.ID || out[2].ID != first.ID {
		t.Fatalf("outbox: %d events", len(out))
	}
	for _, e := range out {
		if _, err := client.OpenDM(a.Key, e); err != nil {
			t.Fatalf("A opens its own %s: %v", e.ID, err)
		}
	}
	page := "/dms/" + a.ID + "?limit=1&until=" + itoa(vectorTime-15)
	if got := events(t, r.Do(t, "GET", page, "", nil, "Authorization", r.Auth(a.Key, "GET", page, vectorTime))); len(got) != 1 || got[0].ID != other.ID {
		t.Fatalf("outbox page: %d events", len(got))
	}

	for _, c := range []struct {
		name   string
		hdr    []string
		status int
		code   string
	}{
		{"anonymous", nil, 401, dms.CodeUnauthorized},
		{"another agent", []string{"Authorization", r.Auth(b.Key, "GET", path, vectorTime)}, 403, dms.CodeForbidden},
		{"bad header", []string{"Authorization", r.Auth(a.Key, "GET", "/dms/x", vectorTime)}, 401, "unauthorized"},
		{"stale header", []string{"Authorization", r.Auth(a.Key, "GET", path, vectorTime-600)}, 401, "unauthorized"},
	} {
		ans := r.Do(t, "GET", path, "", nil, c.hdr...)
		if ans.Status != c.status || ans.Code(t) != c.code || ans.JSON(t)["detail"] == "" {
			t.Errorf("%s: %d %s", c.name, ans.Status, ans.Body)
		}
	}
	for _, p := range []string{"/dms/ABC", "/dms/" + a.ID + "?limit=0", "/dms/" + a.ID + "?kinds=1"} {
		if ans := r.Do(t, "GET", p, "", nil); ans.Status != 400 {
			t.Errorf("%s: %d %s", p, ans.Status, ans.Body)
		}
	}
	if ans := r.Do(t, "GET", "/api"+path, "", nil, "Authorization", r.Auth(a.Key, "GET", "/api"+path, vectorTime)); ans.Status != 200 {
		t.Errorf("/api%s: %d", path, ans.Status)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestMalformedDMRejected: each malformed kind 3 is a 400 with its code
// and leaves the log untouched.
func TestMalformedDMRejected(t *testing.T) {
	r := startRelay(t)
	ag := taskstest.Pool(2)
	a, b := ag[0], ag[1]
	nonce := strings.Repeat("a1", 24)
	good := base64.StdEncoding.EncodeToString(make([]byte, 48))
	cases := []struct {
		name    string
		content string
		tags    [][]string
		code    string
	}{
		{"two p tags", good, [][]string{{"p", b.ID}, {"p", b.ID}, {"nonce", nonce}}, protocol.CodeDMRecipient},
		{"p is author", good, [][]string{{"p", a.ID}, {"nonce", nonce}}, protocol.CodeDMRecipient},
		{"no p", good, [][]string{{"nonce", nonce}}, protocol.CodeDMRecipient},
		{"nonce zz", good, [][]string{{"p", b.ID}, {"nonce", "zz"}}, protocol.CodeDMNonce},
		{"nonce 47 chars", good, [][]string{{"p", b.ID}, {"nonce", nonce[:47]}}, protocol.CodeDMNonce},
		{"uppercase nonce", good, [][]string{{"p", b.ID}, {"nonce", strings.ToUpper(nonce)}}, protocol.CodeDMNonce},
		{"bad base64", "%%%%" + good[4:], [][]string{{"p", b.ID}, {"nonce", nonce}}, protocol.CodeDMContent},
		{"wrong decoded length", base64.StdEncoding.EncodeToString(make([]byte, 50)), [][]string{{"p", b.ID}, {"nonce", nonce}}, protocol.CodeDMContent},
		{"plaintext", "hello bob", [][]string{{"p", b.ID}, {"nonce", nonce}}, protocol.CodeDMContent},
	}
	before := r.Count(t)
	for _, c := range cases {
		e := &protocol.Event{Kind: protocol.KindDM, CreatedAt: vectorTime - 10, Content: c.content, Tags: c.tags}
		e.AgentID = a.ID
		e.Sign(a.Key)
		ans := r.Post(t, e)
		if ans.Status != 400 || ans.Code(t) != c.code {
			t.Errorf("%s: %d %s", c.name, ans.Status, ans.Body)
		}
	}
	if n := r.Count(t); n != before {
		t.Fatalf("log grew from %d to %d", before, n)
	}
	if ans := r.Post(t, seal(t, a, b.ID, "fine", vectorTime-10)); ans.Status != 200 {
		t.Fatalf("good DM: %d %s", ans.Status, ans.Body)
	}
}

// TestDMsStayOutOfDiscovery: a kind 3 with a t tag and a p tag shows in
// neither /rooms nor /home's mentions.
func TestDMsStayOutOfDiscovery(t *testing.T) {
	r := startRelay(t)
	ag := taskstest.Pool(2)
	a, b := ag[0], ag[1]
	e, err := client.SealDM(a.Key, b.ID, []byte("psst"), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Tags = append(e.Tags, []string{"t", "secret-room"})
	e.CreatedAt = vectorTime - 10
	e.Sign(a.Key)
	r.PostAll(t, []*protocol.Event{e, a.Sign(protocol.KindPost, vectorTime-5, "hi", []string{"t", "public-room"})}, 1)
	if body := string(r.Do(t, "GET", "/rooms", "", nil).Body); strings.Contains(body, "secret-room") || !strings.Contains(body, "public-room") {
		t.Fatalf("rooms: %s", body)
	}
	var home struct {
		Mentions []map[string]any `json:"unread_mentions"`
	}
	if err := json.Unmarshal(r.Do(t, "GET", "/home?agent_id="+b.ID, "", nil).Body, &home); err != nil || len(home.Mentions) != 0 {
		t.Fatalf("home mentions: %v %v", home.Mentions, err)
	}
}

// TestSealedTaskResult: a kind 52 whose output is sealed to the requester
// (§18.12 Q8) is accepted and derives the same task status as a plaintext
// twin; the requester and the provider open it, a verifier cannot.
func TestSealedTaskResult(t *testing.T) {
	r := startRelay(t)
	ag := taskstest.Pool(3)
	req, prov, other := ag[0], ag[1], ag[2]
	at := int64(vectorTime - 100)
	status := func(sealed bool, at int64) (*protocol.Event, string) {
		task := taskstest.Request(req, at, vectorTime+3600, taskstest.Reward{Amount: 1}, false)
		res := taskstest.Result(prov, at+2, task)
		if sealed {
			out, tag, err := client.SealTaskOutput(prov.Key, req.ID, []byte(`{"text":"the secret answer"}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			content := map[string]any{"task_id": task.ID, "output": out, "output_format": "json"}
			res = prov.Sign(protocol.KindTaskResult, at+2, content, append(res.Tags, tag)...)
		}
		r.PostAll(t, []*protocol.Event{task, taskstest.Accept(prov, at+1, task), res}, 1)
		var st struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(r.Do(t, "GET", "/task/"+task.ID, "", nil).Body, &st); err != nil || st.Status == "" {
			t.Fatalf("task: %v", err)
		}
		return res, st.Status
	}
	_, plain := status(false, at)
	res, sealed := status(true, at+10)
	t.Logf("status %s", sealed)
	if sealed != plain {
		t.Fatalf("sealed result gives status %q, plaintext %q", sealed, plain)
	}
	for _, k := range []taskstest.Agent{req, prov} {
		if out, err := client.OpenTaskOutput(k.Key, res); err != nil || string(out) != `{"text":"the secret answer"}` {
			t.Fatalf("open: %q %v", out, err)
		}
	}
	if _, err := client.OpenTaskOutput(other.Key, res); err == nil {
		t.Fatal("a third agent opened the output")
	}
}
