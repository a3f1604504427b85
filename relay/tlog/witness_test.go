package tlog

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/relaytest"
)

// TestWitnessCosignsAndAlarms runs relay B with relay A as its witness:
// B's checkpoints come to carry A's cosignature (C2SP tlog-cosignature)
// as B's log grows; a checkpoint signed by B's key that does not extend
// what A verified is refused with 422 and kept as evidence; a stale old
// size is a 409 naming A's size.
func TestWitnessCosignsAndAlarms(t *testing.T) {
	keyA := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0xa}, 32))
	keyB := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0xb}, 32))
	signerB, vkeyB, err := signerFor("b.test/tlog", keyB)
	if err != nil {
		t.Fatal(err)
	}
	modA := NewModule(Options{Witnessed: []string{vkeyB}})
	a := relaytest.Start(t, []relay.Module{modA}, func(c *relay.Config) {
		c.RelayKey, c.PublicBaseURL, c.Logger = keyA, "http://a.test", slog.New(slog.DiscardHandler)
	})
	modB := NewModule(Options{Every: 50 * time.Millisecond, Witnesses: []Witness{{URL: a.URL, Key: modA.WitnessKey()}}})
	b := relaytest.Start(t, []relay.Module{modB}, func(c *relay.Config) {
		c.RelayKey, c.PublicBaseURL, c.Logger = keyB, "http://b.test", slog.New(slog.DiscardHandler)
	})
	vB, _ := note.NewVerifier(vkeyB)
	vA, err := NewCosignVerifier(modA.WitnessKey())
	if err != nil {
		t.Fatal(err)
	}
	k := ed25519.NewKeyFromSeed(make([]byte, 32))
	publish := func(n int) {
		for i := range n {
			e := &protocol.Event{CreatedAt: b.Clock.Now().Unix(), Kind: 1, Content: fmt.Sprint(time.Now().UnixNano(), i), Tags: [][]string{}}
			e.Sign(k)
			b.Post(t, e)
		}
	}
	cosignedAt := func(min int64) func() bool {
		return func() bool {
			raw := b.Do(t, http.MethodGet, "/tlog/checkpoint", "", nil).Body
			n, err := note.Open(raw, note.VerifierList(vB, vA))
			if err != nil || len(n.Sigs) != 2 {
				return false
			}
			_, size, _, _ := ParseCheckpoint(n.Text)
			return size >= min
		}
	}
	publish(10)
	relaytest.Eventually(t, "B's checkpoint cosigned by A", cosignedAt(10))
	publish(300)
	relaytest.Eventually(t, "B's grown checkpoint cosigned by A", cosignedAt(310))

	// A split view: B's key signs a bigger tree with another history.
	size := modA.witness.state.Logs["b.test/tlog"].Size
	forged, _ := sign(signerB, "b.test/tlog", size+1, tlog.RecordHash([]byte("other")), time.Now())
	body := fmt.Appendf(nil, "old %d\n\n%s", size, forged.Note)
	ans := a.Do(t, http.MethodPost, "/tlog/witness/add-checkpoint", "text/plain", body)
	if ans.Status != http.StatusUnprocessableEntity {
		t.Fatalf("inconsistent checkpoint: %d %s", ans.Status, ans.Body)
	}
	if modA.witness.alarms.Load() != 1 || len(modA.witness.state.Alarms) != 1 || modA.witness.state.Alarms[0].New != string(forged.Note) {
		t.Fatalf("alarm not kept: %+v", modA.witness.state.Alarms)
	}
	if m := a.Do(t, http.MethodGet, "/metrics", "", nil).Body; !bytes.Contains(m, []byte("anp2_tlog_witness_alarms_total 1")) {
		t.Fatal("alarm not in /metrics")
	}
	// The report: a kind 24 signed by A's key, carrying both notes.
	relaytest.Eventually(t, "A's alarm report in its log", func() bool {
		evs, err := a.Core.Log().Query(context.Background(), eventlog.Filter{Kinds: []int64{KindTlogAlarm}})
		if err != nil || len(evs) != 1 {
			return false
		}
		e, err := protocol.DecodeJSON(evs[0])
		return err == nil && e.AgentID == protocol.AgentIDOf(keyA) && e.CheckID() == nil && e.CheckSig() == nil &&
			strings.Contains(e.Content, "b.test/tlog") && strings.Contains(e.Content, strings.ReplaceAll(string(forged.Note), "\n", `\n`)[:40])
	})
	stale := fmt.Appendf(nil, "old %d\n\n%s", size-1, forged.Note)
	if ans := a.Do(t, http.MethodPost, "/tlog/witness/add-checkpoint", "text/plain", stale); ans.Status != http.StatusConflict || strings.TrimSpace(string(ans.Body)) != fmt.Sprint(size) {
		t.Fatalf("stale old size: %d %s", ans.Status, ans.Body)
	}
	// A log A does not witness, and garbage.
	other, _, _ := signerFor("c.test/tlog", keyA)
	unknown, _ := sign(other, "c.test/tlog", 1, tlog.Hash{}, time.Now())
	for want, body := range map[int][]byte{
		http.StatusNotFound:   fmt.Appendf(nil, "old 0\n\n%s", unknown.Note),
		http.StatusBadRequest: []byte("old x\n\nnothing"),
	} {
		if ans := a.Do(t, http.MethodPost, "/tlog/witness/add-checkpoint", "text/plain", body); ans.Status != want {
			t.Errorf("want %d, got %d %s", want, ans.Status, ans.Body)
		}
	}
}

// FuzzAddCheckpoint: parseAddCheckpoint never panics and bounds the proof.
func FuzzAddCheckpoint(f *testing.F) {
	f.Add([]byte("old 0\n\nb.test/tlog\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— b.test/tlog x\n"))
	f.Add([]byte("old 3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\nckpt"))
	f.Add([]byte("old -1\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		old, proof, _, err := parseAddCheckpoint(body)
		if err == nil && (old < 0 || len(proof) > 63) {
			t.Fatalf("accepted old %d with %d hashes", old, len(proof))
		}
	})
}
