package governance_test

import (
	"crypto/rand"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/governance"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/cloudflare/circl/sign/mldsa/mldsa65"
)

// pqAct is act with a dual scheme and the pq_sig tags of signers.
func pqAct(t *testing.T, author taskstest.Agent, at int64, content string, co []taskstest.Agent, pq map[string]*mldsa65.PrivateKey, extra ...[]string) *protocol.Event {
	t.Helper()
	tags := append([][]string{{"scheme", governance.SchemeDual}}, extra...)
	for _, c := range co {
		tag, _ := protocol.Cosign(c.Key, governance.KindSovereignAct, content)
		tags = append(tags, tag)
	}
	for id, sk := range pq {
		tag, err := governance.PQSign(sk, id, governance.KindSovereignAct, content)
		if err != nil {
			t.Fatal(err)
		}
		tags = append(tags, tag)
	}
	return author.Sign(governance.KindSovereignAct, at, content, tags...)
}

// TestPQDualSignatures: sovereign keys with ML-DSA-65 parts act only when
// both signatures of each key verify; a forged post-quantum signature or
// a missing scheme leaves the key uncounted, and the act is ignored with
// the reasons in /sovereign_log.
func TestPQDualSignatures(t *testing.T) {
	k := newKeys()
	pqSK := map[string]*mldsa65.PrivateKey{}
	k.opts.PQKeys = map[string][]byte{}
	for _, a := range k.sov {
		pk, sk, err := mldsa65.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := pk.MarshalBinary()
		k.opts.PQKeys[a.ID], pqSK[a.ID] = b, sk
	}
	_, forger, _ := mldsa65.GenerateKey(rand.Reader)
	r := relaytest.Start(t, []relay.Module{k.module(t)})
	now := r.Clock.Now().Unix()
	mallory := taskstest.NewAgent("mallory")

	classic := act(t, k.sov[0], now, map[string]any{"act": "ban_agent", "reason": "classic only"}, k.sov[1:], []string{"p", mallory.ID})
	post(t, r, classic, 200, "")
	forged := pqAct(t, k.sov[0], now, `{"act":"ban_agent","reason":"forged"}`, k.sov[1:],
		map[string]*mldsa65.PrivateKey{k.sov[0].ID: pqSK[k.sov[0].ID], k.sov[1].ID: forger}, []string{"p", mallory.ID})
	post(t, r, forged, 200, "")
	post(t, r, mallory.Sign(protocol.KindPost, now, "not banned yet"), 200, "")
	dual := pqAct(t, k.sov[0], now, `{"act":"ban_agent","reason":"dual"}`, k.sov[1:], pqSK, []string{"p", mallory.ID})
	for _, tag := range dual.Tags {
		for _, v := range tag {
			if len(v) > 1024 {
				t.Fatalf("tag element of %d bytes", len(v))
			}
		}
	}
	post(t, r, dual, 200, "")
	post(t, r, mallory.Sign(protocol.KindPost, now, "banned"), 403, governance.CodeBanned)

	var rows []struct {
		ID      string               `json:"id"`
		Valid   bool                 `json:"valid"`
		Ignored string               `json:"ignored"`
		PQ      []governance.PQCheck `json:"pq"`
	}
	getJSON(t, r, "/sovereign_log", &rows)
	why := map[string]string{}
	for _, row := range rows {
		var reasons []string
		for _, c := range row.PQ {
			reasons = append(reasons, c.Reason)
		}
		why[row.ID] = row.Ignored + ":" + strings.Join(reasons, ",")
	}
	if why[classic.ID] != "below_threshold:scheme_missing,scheme_missing" {
		t.Fatalf("classic: %s", why[classic.ID])
	}
	if !strings.HasPrefix(why[forged.ID], "below_threshold:") || !strings.Contains(why[forged.ID], governance.PQBadSignature) {
		t.Fatalf("forged: %s", why[forged.ID])
	}
	if why[dual.ID] != ":," {
		t.Fatalf("dual: %s", why[dual.ID])
	}
}
