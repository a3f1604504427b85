package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
)

// coverMeta opens an authenticated GET /stream as key and sends the data
// of every event: meta frame, and the id of every event, on the channels.
func coverMeta(t *testing.T, base string, key ed25519.PrivateKey) (meta, events <-chan string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/stream", nil)
	req.Header.Set("Authorization", protocol.HTTPAuth(key, "GET", base+"/stream", nil, time.Now().Unix()))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", err, resp)
	}
	m, ev := make(chan string, 64), make(chan string, 1024)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		kind := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				kind = ""
			case strings.HasPrefix(line, "event: "):
				kind = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && kind == "meta":
				m <- strings.TrimPrefix(line, "data: ")
			case strings.HasPrefix(line, "data: "):
				var e protocol.Event
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e) == nil {
					ev <- e.ID
				}
			}
		}
	}()
	return m, ev
}

// coverGetAs GETs path from base as key (nil: anonymous) into out.
func coverGetAs(t *testing.T, base, path string, key ed25519.PrivateKey, out any) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Header.Set("Origin", "https://client.example")
	if key != nil {
		req.Header.Set("Authorization", protocol.HTTPAuth(key, "GET", base+path, nil, time.Now().Unix()))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") == "" || json.NewDecoder(resp.Body).Decode(out) != nil {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
}

// TestCoverAppealQueue: on a real relay process, an author's appeal of
// its hidden post opens an appeal (seed §7.3): GET /appeals lists it with
// the flags' weights, shows the flagged event to a high-trust reader (and
// to a reader asking include_hidden) but not to anonymous readers, a
// high-trust reader's open stream gets a meta notice for it while
// another reader's does not, and anp2 replay agrees with /state.
func TestCoverAppealQueue(t *testing.T) {
	ag := taskstest.Pool(9)
	author, top, other := ag[0], ag[1], ag[2]
	flaggers, voters := ag[3:6], ag[6:9]
	p := startProc(t, filepath.Join(t.TempDir(), "appeals.db"))
	now := time.Now().Unix()
	post := func(e *protocol.Event) {
		t.Helper()
		if st, body := httpJSON(t, "POST", p.base+"/events", protocol.AppendJSON(nil, e)); st != 200 {
			t.Fatalf("publish kind %d: %d %v", e.Kind, st, body)
		}
	}
	target := author.Sign(protocol.KindPost, now, "a post some will flag")
	post(target)
	for _, v := range voters { // top is the only trusted agent: the top 1%
		post(v.Sign(protocol.KindTrustVote, now, map[string]any{"score": 1}, []string{"p", top.ID}))
	}
	topMeta, _ := coverMeta(t, p.base, top.Key)
	otherMeta, otherEvents := coverMeta(t, p.base, other.Key)
	for _, f := range flaggers {
		post(f.Sign(protocol.KindFlag, now, map[string]any{"category": "spam", "reason": "spam"}, []string{"e", target.ID}, []string{"p", author.ID}))
	}
	waitFor(t, "the post hidden", func() bool {
		_, em := httpJSON(t, "GET", p.base+"/events/"+target.ID+"/flags", nil)
		return em["visibility"] == "hidden"
	})
	appeal := author.Sign(protocol.KindFlag, now, map[string]any{"category": "appeal", "reason": "it was not spam"},
		[]string{"e", target.ID}, []string{"p", author.ID})
	post(appeal)

	deadline := time.After(60 * time.Second)
	for got := false; !got; {
		select {
		case m := <-topMeta:
			got = strings.Contains(m, `"appeal":true`) && strings.Contains(m, appeal.ID) && strings.Contains(m, target.ID)
		case <-deadline:
			t.Fatal("no appeal notice on the high-trust reader's stream")
		}
	}
	sentinel := other.Sign(protocol.KindPost, time.Now().Unix(), "sentinel")
	post(sentinel)
	for seen := false; !seen; {
		select {
		case m := <-otherMeta:
			if strings.Contains(m, `"appeal"`) {
				t.Fatalf("a reader outside the top 1%% got the appeal notice: %s", m)
			}
		case id := <-otherEvents:
			seen = id == sentinel.ID
		case <-deadline:
			t.Fatal("the sentinel never reached the other stream")
		}
	}

	type queue struct {
		Total   int `json:"total"`
		Appeals []struct {
			AppealID   string          `json:"appeal_id"`
			EventID    string          `json:"event_id"`
			FlagWeight float64         `json:"flag_weight"`
			Flags      []any           `json:"flags"`
			Event      *protocol.Event `json:"event"`
		} `json:"appeals"`
	}
	for _, c := range []struct {
		name      string
		key       ed25519.PrivateKey
		query     string
		seesEvent bool
	}{
		{"anonymous", nil, "", false},
		{"high-trust reader", top.Key, "", true},
		{"other reader", other.Key, "", false},
		{"other reader asking include_hidden", other.Key, "?include_hidden=true", true},
	} {
		var q queue
		coverGetAs(t, p.base, "/appeals"+c.query, c.key, &q)
		if q.Total != 1 || len(q.Appeals) != 1 || q.Appeals[0].AppealID != appeal.ID || q.Appeals[0].EventID != target.ID ||
			q.Appeals[0].FlagWeight < 3 || len(q.Appeals[0].Flags) != 3 {
			t.Fatalf("%s: %+v", c.name, q)
		}
		if (q.Appeals[0].Event != nil) != c.seesEvent || c.seesEvent && q.Appeals[0].Event.ID != target.ID {
			t.Fatalf("%s: event %+v, want shown=%v", c.name, q.Appeals[0].Event, c.seesEvent)
		}
	}
	if st, body := httpJSON(t, "GET", p.base+"/appeals?limit=0", nil); st != 400 || body["code"] == nil {
		t.Fatalf("limit=0: %d %v", st, body)
	}
	at := "--at=" + strconv.FormatInt(time.Now().Unix(), 10)
	if out := runCLI(t, "replay", at, "--compare", p.base, p.base); !strings.Contains(out, "match: ") {
		t.Fatalf("replay: %s", out)
	}
}
