package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/coder/websocket"
)

// TestAbuseDropinSurfaces attacks what the drop-in work added, against a
// real relay process: the OpenAPI document never reflects a forged Host
// header (it would poison caches in front of the relay); a kind 1 naming
// every schema its 32 tags allow, with content that breaks each, gets one
// bounded warning and is stored; and /subscribe answers a stream of
// garbage frames with notices, one each, and keeps serving.
func TestAbuseDropinSurfaces(t *testing.T) {
	p := startProc(t, filepath.Join(t.TempDir(), "relay.db"))
	for i := range 20 {
		host := "evil" + strconv.Itoa(i) + ".example"
		req, _ := http.NewRequest("GET", p.base+"/openapi.json", nil)
		req.Host = host // the header Go sends; a Header entry would be ignored
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.Contains(string(body), "evil") || !strings.Contains(string(body), p.base) {
			t.Fatalf("/openapi.json with Host %s: %d, reflected: %v", host, resp.StatusCode, strings.Contains(string(body), "evil"))
		}
	}

	a := taskstest.NewAgent("abuse-dropin")
	tags := make([][]string, 0, 32)
	for range 32 {
		tags = append(tags, []string{"s", "anp.heartbeat.v1"})
	}
	e := a.Sign(protocol.KindPost, time.Now().Unix(), `{"v":"x","st":[1,2,3],"q":-1,"extra":"`+strings.Repeat("z", 4000)+`"}`, tags...)
	status, _, body := httpDo(t, "POST", p.base+"/events", protocol.AppendJSON(nil, e))
	var pa relay.PublishAnswer
	if status != 200 || json.Unmarshal(body, &pa) != nil || !pa.Stored || len(pa.Warnings) != 1 || len(body) > 8<<10 {
		t.Fatalf("a schema-breaking kind 1 under 32 s tags: %d, %d bytes: %.300s", status, len(body), body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(p.base, "http")+"/subscribe", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	for i := range 200 {
		garbage := []string{`[]`, `{"action":"sub"}`, `{"action":"x"}`, `not json`, `{"action":"sub","id":"s","filter":{"kinds":[]}}`}[i%5]
		if err := c.Write(ctx, websocket.MessageText, []byte(garbage)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		_, b, err := c.Read(ctx)
		var m struct{ Action string }
		if err != nil || json.Unmarshal(b, &m) != nil || m.Action != "notice" && m.Action != "closed" {
			t.Fatalf("frame %d (%s): %s %v", i, garbage, b, err)
		}
	}
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"action":"sub","id":"ok","filter":{"kinds":[1]}}`)); err != nil {
		t.Fatal(err)
	}
	for {
		_, b, err := c.Read(ctx)
		var m struct {
			Action string
			SubID  string `json:"sub_id"`
		}
		if err != nil || json.Unmarshal(b, &m) != nil {
			t.Fatalf("after the garbage: %s %v", b, err)
		}
		if m.Action == "eose" && m.SubID == "ok" {
			break
		}
	}
}
