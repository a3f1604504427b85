package relay

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// TestBatchJudgesEachEventAsPublish sends one batch holding good events,
// a stored duplicate, a repeated event, a forged one, an old one, a kind 11
// beat, a malformed envelope and a revoke of someone else's event, as JSON
// and as CBOR, and requires for each the status and code POST /events
// gives the same event alone on a second relay, the good ones committed
// and the bad ones absent from the log.
func TestBatchJudgesEachEventAsPublish(t *testing.T) {
	for _, enc := range []string{"json", "cbor"} {
		t.Run(enc, func(t *testing.T) {
			batchR, singleR := startRelay(t), startRelay(t)
			a, b := key(1), key(2)
			stored := mk(a, vectorTime-10, 1, "already here")
			other := mk(b, vectorTime-9, 1, "b's post")
			for _, r := range []*testRelay{batchR, singleR} {
				for _, e := range []*protocol.Event{stored, other} {
					if ans := r.post(t, e); ans.status != 200 {
						t.Fatal(ans.status, string(ans.body))
					}
				}
			}
			forged := *mk(a, vectorTime-8, 1, "original")
			forged.Content = "tampered"
			good1, good2 := mk(a, vectorTime-7, 1, "one", []string{"t", "batch"}), mk(b, vectorTime-6, 1, "two", []string{"t", "batch"})
			evs := []*protocol.Event{good1, stored, &forged, mk(a, vectorTime-30*86400, 1, "old"), mk(a, vectorTime-5, 11, `{"status":"ok"}`),
				mk(a, vectorTime-4, 9, "{}", []string{"e", other.ID}), good2, good1}
			raws := make([][]byte, len(evs))
			for i, e := range evs {
				raws[i] = protocol.AppendJSON(nil, e)
			}
			broken := []byte(`{"id":"zz","kind":1}`)
			var body []byte
			ct := "application/json"
			if enc == "json" {
				body = []byte("[" + string(joinBytes(append(raws, broken), ",")) + "]")
			} else {
				var err error
				if body, err = protocol.EncodeCBORList(evs); err != nil {
					t.Fatal(err)
				}
				ct = protocol.ContentTypeCBOR
			}
			before := batchR.count(t)
			ans := batchR.do(t, "POST", "/events/batch", ct, body)
			var got batchAnswer
			if ans.status != 200 || json.Unmarshal(ans.body, &got) != nil {
				t.Fatalf("batch: %d %s", ans.status, ans.body)
			}
			want := len(evs)
			if enc == "json" {
				want++
			}
			if len(got.Results) != want {
				t.Fatalf("%d results for %d items", len(got.Results), want)
			}
			for i, res := range got.Results {
				if res.Index != i {
					t.Fatalf("result %d has index %d", i, res.Index)
				}
				var single answer
				if i < len(evs) {
					single = singleR.post(t, evs[i])
				} else {
					single = singleR.do(t, "POST", "/events", "application/json", broken)
				}
				code := ""
				if single.status != 200 {
					code = "malformed_envelope"
					if single.status != 422 {
						code = single.code(t)
					}
				}
				if res.Status != single.status || res.Code != code {
					t.Errorf("item %d: batch %d %q, alone %d %q (%s)", i, res.Status, res.Code, single.status, code, single.body)
				}
			}
			// Stored: good1, good2 (good1's repeat is a duplicate, the
			// beat is accepted, never stored); nothing else reached the log.
			if n := batchR.count(t); n != before+2 || got.Accepted != 3 || got.Duplicate != 2 || got.Rejected != want-5 {
				t.Fatalf("log %d → %d, answer %+v", before, n, got)
			}
			if !got.Results[0].Stored || !got.Results[7].Duplicate || got.Results[4].Stored || !got.Results[4].Accepted {
				t.Fatalf("results %+v", got.Results)
			}
		})
	}
}

// TestBatchChargesEveryEvent: a batch pays the address allowance per
// event, so a batch cannot buy more than POST /events would; an oversized
// or malformed body is one 400 and stores nothing.
func TestBatchChargesEveryEvent(t *testing.T) {
	r := startRelay(t, func(c *Config) { c.RatePerIP, c.RatePerAgent = 5, 0 })
	var evs []string
	for i := range 8 {
		evs = append(evs, string(protocol.AppendJSON(nil, mk(key(i), vectorTime-int64(i), 1, fmt.Sprint("post ", i)))))
	}
	var got batchAnswer
	ans := r.do(t, "POST", "/events/batch", "application/json", []byte("["+strings.Join(evs, ",")+"]"))
	if json.Unmarshal(ans.body, &got) != nil || got.Accepted != 5 || got.Rejected != 3 || got.Results[7].Status != 429 || got.Results[7].Code != CodeRateLimited {
		t.Fatalf("rate: %d %s", ans.status, ans.body)
	}
	big := "[" + strings.TrimSuffix(strings.Repeat(evs[0]+",", MaxBatchEvents+1), ",") + "]"
	for name, body := range map[string]string{"too many": big, "not an array": `{"a":1}`, "garbage": `[`} {
		if ans := r.do(t, "POST", "/events/batch", "application/json", []byte(body)); ans.status != 400 {
			t.Fatalf("%s: %d %s", name, ans.status, ans.body)
		}
	}
	if n := r.count(t); n != 5 {
		t.Fatalf("log holds %d events, want 5", n)
	}
}

func joinBytes(parts [][]byte, sep string) []byte {
	var out []byte
	for i, p := range parts {
		if i > 0 {
			out = append(out, sep...)
		}
		out = append(out, p...)
	}
	return out
}

// TestBatchRefusesNull: a null body (JSON null, CBOR null or undefined) is
// not an array: one 400 with its code, never an empty batch answered 200.
func TestBatchRefusesNull(t *testing.T) {
	r := startRelay(t)
	for name, tc := range map[string]struct {
		ct   string
		body []byte
	}{
		"json null":      {"application/json", []byte("null")},
		"json null ws":   {"application/json", []byte(" \n null\t")},
		"cbor null":      {protocol.ContentTypeCBOR, []byte{0xf6}},
		"cbor undefined": {protocol.ContentTypeCBOR, []byte{0xf7}},
	} {
		ans := r.do(t, "POST", "/events/batch", tc.ct, tc.body)
		var e struct{ Code string }
		if ans.status != 400 || json.Unmarshal(ans.body, &e) != nil || e.Code == "" {
			t.Errorf("%s: %d %s, want 400 with a code", name, ans.status, ans.body)
		}
	}
	if n := r.count(t); n != 0 {
		t.Fatalf("log holds %d events", n)
	}
}
