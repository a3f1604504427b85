package stream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/stream"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestSeed001Axes: on a real relay, filter= takes seed 001 §8's axes:
// sender (the author's agent_id), content_type (json, text, or a schema
// named by an s tag), and org and tool, which parse and match nothing;
// their bad values are refused before the stream starts.
func TestSeed001Axes(t *testing.T) {
	r := startRelay(t)
	a := taskstest.Pool(2)
	at := int64(vectorTime - 100)
	text := a[0].Sign(protocol.KindPost, at, "hello")
	beat := a[0].Sign(1001, at+1, `{"v":1,"st":"ok","q":42}`, []string{"s", "anp.heartbeat.v1"})
	obj := a[1].Sign(protocol.KindPost, at+2, ` {"x":2}`)
	arr := a[1].Sign(protocol.KindPost, at+3, `[1,2]`)
	r.PostAll(t, []*protocol.Event{text, beat, obj, arr}, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// replayed returns the ids a stream replays from the start of the log
	// before it goes live.
	replayed := func(filter string) []string {
		req, _ := http.NewRequestWithContext(ctx, "GET", r.URL+"/stream?after=0&filter="+url.QueryEscape(filter), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("filter %q: %v %v", filter, err, resp)
		}
		defer resp.Body.Close()
		var ids []string
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if line == ": live" {
				slices.Sort(ids)
				return ids
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var e protocol.Event
				if err := json.Unmarshal([]byte(data), &e); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, e.ID)
			}
		}
		t.Fatalf("filter %q: stream ended before live: %v", filter, sc.Err())
		return nil
	}
	want := func(evs ...*protocol.Event) []string {
		ids := []string{}
		for _, e := range evs {
			ids = append(ids, e.ID)
		}
		slices.Sort(ids)
		return ids
	}
	for _, c := range []struct {
		filter string
		want   []string
	}{
		{"sender:" + a[0].ID, want(text, beat)},
		{"sender:" + a[1].ID + ",author:" + a[1].ID, want(obj, arr)},
		{"content_type:json", want(beat, obj)},
		{"content_type:text", want(text, arr)},
		{"content_type:json,sender:" + a[1].ID, want(obj)},
		{"content_type:anp.heartbeat.v1", want(beat)},
		{"content_type:anp.other.v1", want()},
		{"org:acme", want()},
		{"tool:claude-code,kind:1", want()},
	} {
		if got := replayed(c.filter); !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("filter %q replayed %v; want %v", c.filter, got, c.want)
		}
	}
	for _, c := range []struct{ filter, code string }{
		{"sender:~alice", stream.CodeFilterValueInvalid},
		{"sender:" + a[0].ID + ",sender:" + a[1].ID, stream.CodeFilterValueInvalid},
		{"content_type:json,content_type:text", stream.CodeFilterValueInvalid},
		{"content_type:", stream.CodeFilterValueInvalid},
		{"org:", stream.CodeFilterValueInvalid},
		{"tool:" + strings.Repeat("x", 1025), stream.CodeFilterValueInvalid},
		{"scope:me", stream.CodeFilterAxisUnknown},
	} {
		ans := r.Do(t, "GET", "/stream?filter="+url.QueryEscape(c.filter), "", nil)
		if ans.Status != 400 || ans.Code(t) != c.code {
			t.Errorf("filter %.60q: %d %s; want 400 %s", c.filter, ans.Status, ans.Body, c.code)
		}
	}
}
