package redact_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/redact"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/sqlite"
)

func key(i byte) ed25519.PrivateKey {
	seed := make([]byte, 32)
	seed[0], seed[1] = 0x52, i
	return ed25519.NewKeyFromSeed(seed)
}

func event(k ed25519.PrivateKey, kind int64, content string, tags ...[]string) *protocol.Event {
	if tags == nil {
		tags = [][]string{}
	}
	e := &protocol.Event{CreatedAt: relaytest.VectorTime, Kind: kind, Content: content, Tags: tags}
	e.Sign(k)
	return e
}

func redaction(k ed25519.PrivateKey, target string) *protocol.Event {
	c, _ := json.Marshal(map[string]string{"id": target, "reason": "takedown " + target[:6]})
	return event(k, protocol.KindRedaction, string(c), []string{"e", target})
}

// TestHonoredRedactionLive: on a relay that honors a peer relay's key,
// that key's kind 25 withholds the event it names whether it arrives
// before or after it: 451 (with CORS), no reconciliation item, a publish
// of the event again is 451, GET /withheld and /metrics list it; another
// key's kind 25 withholds nothing. A restart over the same log derives
// the same.
func TestHonoredRedactionLive(t *testing.T) {
	honored, stranger, author := key(1), key(2), key(3)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "relay.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	honor := func(c *relay.Config) { c.HonorRedactions = []string{protocol.AgentIDOf(honored)} }
	r := relaytest.On(t, st, []relay.Module{redact.NewModule()}, honor)
	before := event(author, 1, "redacted after it arrived", []string{"t", "x"})
	after := event(author, 1, "redacted before it arrived", []string{"t", "x"})
	kept := event(author, 1, "named by a stranger", []string{"t", "x"})
	for _, e := range []*protocol.Event{before, redaction(honored, before.ID), redaction(honored, after.ID),
		redaction(stranger, kept.ID), kept} {
		if a := r.Post(t, e); a.Status != http.StatusOK {
			t.Fatalf("post kind %d: %d %s", e.Kind, a.Status, a.Body)
		}
	}
	// A publish of an event already withheld is refused; from a peer it is
	// stored (gates judge direct publishes only) and withheld on arrival.
	if a := r.Post(t, after); a.Status != http.StatusUnavailableForLegalReasons {
		t.Fatalf("publish after its redaction: %d %s", a.Status, a.Body)
	}
	if acc, rej, err := r.Core.IngestMirrored(context.Background(), []*protocol.Event{after}); acc != 1 || rej != 0 || err != nil {
		t.Fatalf("mirrored: %d %d %v", acc, rej, err)
	}
	check := func(r *relaytest.Relay, n int) {
		t.Helper()
		for _, e := range []*protocol.Event{before, after} {
			a := r.Do(t, http.MethodGet, "/events/"+e.ID, "", nil, "Origin", "https://example.org")
			if a.Status != http.StatusUnavailableForLegalReasons || a.Code(t) != "withheld" || !strings.Contains(string(a.Body), "takedown") ||
				a.Header.Get("Access-Control-Allow-Origin") == "" {
				t.Fatalf("GET withheld %s: %d %v %s", e.ID, a.Status, a.Header, a.Body)
			}
			if r.Core.Index().Has(relay.ItemOf(e)) {
				t.Fatalf("%s is in the reconciliation index", e.ID)
			}
			if a := r.Post(t, e); a.Status != http.StatusUnavailableForLegalReasons {
				t.Fatalf("publish of a withheld event: %d %s", a.Status, a.Body)
			}
		}
		if a := r.Do(t, http.MethodGet, "/events/"+kept.ID, "", nil); a.Status != http.StatusOK {
			t.Fatalf("a stranger's redaction withheld an event: %d %s", a.Status, a.Body)
		}
		if !r.Core.Index().Has(relay.ItemOf(kept)) {
			t.Fatal("the kept event left the index")
		}
		a := r.Do(t, http.MethodGet, "/events?t=x&include_revoked=true", "", nil)
		if strings.Contains(string(a.Body), before.ID) || strings.Contains(string(a.Body), after.ID) || !strings.Contains(string(a.Body), kept.ID) {
			t.Fatalf("list: %s", a.Body)
		}
		var w redact.Answer
		a = r.Do(t, http.MethodGet, "/api/withheld", "", nil, "Origin", "https://example.org")
		if err := json.Unmarshal(a.Body, &w); err != nil || len(w.Withheld) != n || len(w.Redactors) != 1 ||
			a.Header.Get("Access-Control-Allow-Origin") == "" {
			t.Fatalf("GET /withheld: %s %v", a.Body, err)
		}
		if a := r.Do(t, http.MethodGet, "/metrics", "", nil); !strings.Contains(string(a.Body), fmt.Sprintf("anp2_withheld_events %d\n", n)) {
			t.Fatalf("metrics lack the withheld count")
		}
	}
	check(r, 2)
	// The honoring relay takes the bodies out of its log too.
	for _, e := range []*protocol.Event{before, after} {
		relaytest.Eventually(t, "the body of "+e.ID+" replaced", func() bool {
			st, err := r.Store.Get(context.Background(), e.ID)
			_, _, ok := eventlog.WithheldOf(st.Body)
			return err == nil && ok
		})
	}
	// An event a counted redaction names that never reached this relay.
	c, _ := json.Marshal(map[string]string{"reason": "never here"})
	absent := strings.Repeat("ab", 32)
	if a := r.Post(t, event(honored, protocol.KindRedaction, string(c), []string{"e", absent})); a.Status != http.StatusOK {
		t.Fatalf("post: %d %s", a.Status, a.Body)
	}
	if a := r.Do(t, http.MethodGet, "/events/"+absent, "", nil); a.Status != http.StatusUnavailableForLegalReasons {
		t.Fatalf("GET of a withheld event never stored: %d %s", a.Status, a.Body)
	}
	d1 := r.Core.State().Digest(relaytest.VectorTime)
	r.Close()
	again := relaytest.On(t, st, []relay.Module{redact.NewModule()}, honor)
	check(again, 3)
	if d2 := again.Core.State().Digest(relaytest.VectorTime); d2.Digest != d1.Digest || d2.Revoked != d1.Revoked {
		t.Fatalf("restart: %+v, before %+v", d2, d1)
	}
	// A relay that does not honor the key withholds nothing.
	plain := relaytest.Start(t, []relay.Module{redact.NewModule()})
	for _, e := range []*protocol.Event{before, redaction(honored, before.ID)} {
		plain.Post(t, e)
	}
	if a := plain.Do(t, http.MethodGet, "/events/"+before.ID, "", nil); a.Status != http.StatusOK {
		t.Fatalf("a relay that does not honor the key: %d %s", a.Status, a.Body)
	}
}
