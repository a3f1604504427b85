package explorer_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/chromedp/chromedp"
)

// browserCheck runs the explorer's own check (jcs.js) on raw event lines
// in the browser: each line is parsed there with JSON.parse, as the pages
// parse the relay's answers.
type browserVerdict struct {
	Canonical string `json:"canonical"`
	Derived   string `json:"derived"`
	IDOK      bool   `json:"idOK"`
	SigOK     bool   `json:"sigOK"`
}

func browserCheck(t *testing.T, lines []string) []browserVerdict {
	t.Helper()
	ctx := tab(t)
	open(t, ctx, "publish", "publish")
	arg, _ := json.Marshal(lines)
	var out []browserVerdict
	js := `import('/explorer/jcs.js').then((m) => Promise.all(` + string(arg) + `.map((l) => m.check(JSON.parse(l)))))`
	if err := chromedp.Run(ctx, chromedp.Evaluate(js, &out, awaitPromise)); err != nil {
		t.Fatal(err)
	}
	if len(out) != len(lines) {
		t.Fatalf("%d verdicts for %d events", len(out), len(lines))
	}
	return out
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		out = append(out, string(l))
	}
	return out
}

// TestIDCheckAgreesOnNetworkSample: on the 443 public-network events the
// browser derives byte for byte the relay's canonical bytes, and its id
// and signature verdicts are the relay's: 196 accepted, 247 id
// mismatches, and the relay serving the sample (imported) holds exactly
// the ones the browser accepts.
func TestIDCheckAgreesOnNetworkSample(t *testing.T) {
	needBrowser(t)
	lines := readLines(t, "../../testdata/vectors/anp2-network-sample.jsonl")
	got := browserCheck(t, lines)
	accepted := 0
	for i, l := range lines {
		e, err := protocol.DecodeJSON([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		idOK := e.CheckID() == nil
		sigOK := idOK && e.CheckSig() == nil
		b := got[i]
		if b.Canonical != string(e.CanonicalPayload()) || b.IDOK != idOK || b.SigOK != sigOK {
			t.Errorf("event %d (%s): browser id %v sig %v, relay id %v sig %v\n browser %s\n relay   %s", i, e.ID, b.IDOK, b.SigOK, idOK, sigOK, b.Canonical, e.CanonicalPayload())
		}
		if sigOK {
			accepted++
		}
		// The relay imported the sample: it holds what verifies, and
		// nothing else.
		st := getJSON(t, bt.base+"/events/"+e.ID+"?include_revoked=true", nil)
		if (st == http.StatusOK) != sigOK {
			t.Errorf("event %s: relay answers %d, browser verdict %v", e.ID, st, sigOK)
		}
	}
	if accepted != 196 {
		t.Fatalf("%d of the sample verify in the browser, want 196", accepted)
	}
}

// TestIDCheckVectors: the independent conformance vectors (JCS edge
// cases, bad ids, bad signatures) get the verdicts they list, and the
// Ed25519 edge cases get libsodium's answers (small-order keys and R,
// non-canonical keys refused), which WebCrypto alone would not give.
func TestIDCheckVectors(t *testing.T) {
	needBrowser(t)
	var events []string
	var want []struct {
		Name   string
		Valid  bool
		Reason string
	}
	for _, l := range readLines(t, "../../testdata/vectors/events.jsonl") {
		var v struct {
			Name   string
			Valid  bool
			Reason string
			Event  json.RawMessage
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatal(err)
		}
		events = append(events, string(v.Event))
		want = append(want, struct {
			Name   string
			Valid  bool
			Reason string
		}{v.Name, v.Valid, v.Reason})
	}
	for i, b := range browserCheck(t, events) {
		w := want[i]
		// A pow reason is about policy, not the id or signature.
		ok := b.IDOK && b.SigOK
		if wantOK := w.Valid || w.Reason == "pow"; ok != wantOK || (w.Reason == "id" && b.IDOK) {
			t.Errorf("%s: browser id %v sig %v, vector valid %v reason %q", w.Name, b.IDOK, b.SigOK, w.Valid, w.Reason)
		}
	}

	ctx := tab(t)
	open(t, ctx, "publish", "publish")
	var cases []map[string]any
	for _, l := range readLines(t, "../../testdata/vectors/ed25519-edge-cases.jsonl") {
		var c map[string]any
		json.Unmarshal([]byte(l), &c)
		cases = append(cases, c)
	}
	arg, _ := json.Marshal(cases)
	var verdicts []bool
	js := `import('/explorer/jcs.js').then((m) => Promise.all(` + string(arg) + `.map((c) => m.verifyBytes(m.unhex(c.pub_key), m.unhex(c.message), m.unhex(c.signature)))))`
	if err := chromedp.Run(ctx, chromedp.Evaluate(js, &verdicts, awaitPromise)); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		if verdicts[i] != c["libsodium"].(bool) {
			t.Errorf("edge case %v (%v): browser %v, libsodium %v", c["case"], c["note"], verdicts[i], c["libsodium"])
		}
	}
}
