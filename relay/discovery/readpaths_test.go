package discovery_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/stream"
	"github.com/anp2net/relay/relay/ws"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/coder/websocket"
)

// TestInviteOnlyReadPaths: §12.8 on every read path of a real relay. An
// invite_only agent's events are left out for an anonymous reader and for
// an agent it does not follow — on GET /events (a thread gets a
// placeholder), /events/{id}, /raw, /history, an anonymous /export,
// /stream and a WebSocket REQ — and returned to an agent it follows and to
// itself. Withdrawing the follow closes them again at once.
func TestInviteOnlyReadPaths(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{discovery.NewModule(), stream.NewModule(), ws.NewModule(ws.Options{})})
	a := taskstest.Pool(4)
	hermit, friend, stranger, bob := a[0], a[1], a[2], a[3]
	now := int64(relaytest.VectorTime)
	root := bob.Sign(protocol.KindPost, now-100, "open question")
	profile := hermit.Sign(protocol.KindProfile, now-90, map[string]any{"name": "hermit", "discoverability": "invite_only"})
	follow := hermit.Sign(protocol.KindSubscribe, now-89, "", []string{"p", friend.ID})
	secret := hermit.Sign(protocol.KindPost, now-80, "quiet answer", []string{"e", root.ID, "root"})
	sentinel := bob.Sign(protocol.KindPost, now-70, "the end")
	r.PostAll(t, []*protocol.Event{root, profile, follow, secret, sentinel}, 1)

	readers := []struct {
		name string
		key  taskstest.Agent
		sees bool
	}{{"anonymous", taskstest.Agent{}, false}, {"stranger", stranger, false}, {"friend", friend, true}, {"hermit", hermit, true}}
	auth := func(who taskstest.Agent, method, path string) []string {
		if who.ID == "" {
			return nil
		}
		return []string{"Authorization", r.Auth(who.Key, method, path, now)}
	}
	for _, rd := range readers {
		// GET /events by author, and the thread with its placeholder.
		path := "/events?authors=" + hermit.ID + "&kinds=1"
		if got := r.Do(t, "GET", path, "", nil, auth(rd.key, "GET", path)...); got.Status != 200 || strings.Contains(string(got.Body), secret.ID) != rd.sees {
			t.Fatalf("%s: GET /events by author: %d %s", rd.name, got.Status, got.Body)
		}
		path = "/events?e=" + root.ID
		got := r.Do(t, "GET", path, "", nil, auth(rd.key, "GET", path)...)
		placeholder := strings.Contains(string(got.Body), `["hidden","`+secret.ID+`"]`)
		if got.Status != 200 || strings.Contains(string(got.Body), `"id":"`+secret.ID) != rd.sees || placeholder == rd.sees {
			t.Fatalf("%s: thread: %d %s", rd.name, got.Status, got.Body)
		}
		// Direct reads.
		for _, p := range []string{"/events/" + secret.ID, "/events/" + secret.ID + "/raw"} {
			got := r.Do(t, "GET", p, "", nil, auth(rd.key, "GET", p)...)
			if rd.sees && got.Status != 200 || !rd.sees && (got.Status != 403 || got.Code(t) != relay.CodeHidden) {
				t.Fatalf("%s: GET %s: %d %s", rd.name, p, got.Status, got.Body)
			}
		}
		path = "/history/" + hermit.ID
		if got := r.Do(t, "GET", path, "", nil, auth(rd.key, "GET", path)...); got.Status != 200 || strings.Contains(string(got.Body), profile.ID) != rd.sees {
			t.Fatalf("%s: history: %d %s", rd.name, got.Status, got.Body)
		}
		// The stream's replay up to a later event by someone else.
		path = "/stream?after=0&kinds=1"
		if ids := streamUntil(t, r, path, sentinel.ID, auth(rd.key, "GET", path)...); strings.Contains(ids, secret.ID) != rd.sees {
			t.Fatalf("%s: stream delivered %s", rd.name, ids)
		}
		if ids := wsReplay(t, r, rd.key, now); strings.Contains(ids, secret.ID) != rd.sees || !strings.Contains(ids, sentinel.ID) {
			t.Fatalf("%s: websocket replay %s", rd.name, ids)
		}
	}

	// /export: the raw log for mirrors and auditors; an anonymous export
	// leaves the events out and says so.
	got := r.Do(t, "GET", "/export", "", nil)
	if got.Status != 200 || strings.Contains(string(got.Body), secret.ID) || got.Header.Get("X-ANP2-Restricted") != "true" {
		t.Fatalf("anonymous export: %d %v %s", got.Status, got.Header, got.Body)
	}
	got = r.Do(t, "GET", "/export", "", nil, auth(stranger, "GET", "/export")...)
	if got.Status != 200 || !strings.Contains(string(got.Body), secret.ID) || got.Header.Get("X-ANP2-Restricted") != "" {
		t.Fatalf("authenticated export: %d %s", got.Status, got.Body)
	}

	// The follow withdrawn: the friend is a stranger now.
	r.PostAll(t, []*protocol.Event{hermit.Sign(protocol.KindSubscribe, now-60, map[string]any{"withdraw": true}, []string{"p", friend.ID})}, 1)
	path := "/events/" + secret.ID
	if got := r.Do(t, "GET", path, "", nil, auth(friend, "GET", path)...); got.Status != 403 {
		t.Fatalf("after the withdrawal: %d %s", got.Status, got.Body)
	}
	// Back to public: everyone sees it.
	r.PostAll(t, []*protocol.Event{hermit.Sign(protocol.KindProfile, now-50, map[string]any{"name": "hermit"})}, 1)
	if got := r.Do(t, "GET", path, "", nil); got.Status != 200 {
		t.Fatalf("public again: %d %s", got.Status, got.Body)
	}
	if got := r.Do(t, "GET", "/export", "", nil); got.Header.Get("X-ANP2-Restricted") != "" || !strings.Contains(string(got.Body), secret.ID) {
		t.Fatalf("export with no invite_only agent: %v", got.Header)
	}
}

// streamUntil reads GET path's events until one names last and returns the
// data lines joined.
func streamUntil(t *testing.T, r *relaytest.Relay, path, last string, hdr ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a guard against a hang, not a measurement
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", r.URL+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream %s: %v %v", path, err, resp)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	var got []string
	for lines.Scan() {
		if l := lines.Text(); strings.HasPrefix(l, "data:") {
			got = append(got, l)
			if strings.Contains(l, last) {
				return strings.Join(got, "\n")
			}
		}
	}
	t.Fatalf("stream %s ended before %s: %v", path, last, lines.Err())
	return ""
}

// wsReplay sends a kind 1 REQ from the start of the log over a real
// WebSocket, authenticated as who unless it is the zero agent, and
// returns the frames up to EOSE.
func wsReplay(t *testing.T, r *relaytest.Relay, who taskstest.Agent, now int64) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a guard against a hang, not a measurement
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(r.URL, "http") + "/ws"
	c, _, err := websocket.Dial(ctx, wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	send := func(b []byte) {
		if err := c.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	read := func() string {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if who.ID != "" {
		raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(protocol.HTTPAuth(who.Key, "GET", wsURL, nil, now), "ANP2 "))
		send([]byte(`["AUTH",` + string(raw) + `]`))
		if f := read(); !strings.HasPrefix(f, `["OK"`) || !strings.Contains(f, "true") {
			t.Fatalf("auth: %s", f)
		}
	}
	req, _ := json.Marshal([]any{"REQ", "s", map[string]any{"kinds": "1", "after": 0}})
	send(req)
	var frames []string
	for {
		f := read()
		frames = append(frames, f)
		if strings.HasPrefix(f, `["EOSE"`) {
			return strings.Join(frames, "\n")
		}
	}
}
