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

// TestPQSeedTagForm: the seed's §15.2 tags, ["scheme",
// "ed25519+dilithium"] and the author's ["pq_sig", <hex>…] with no agent
// id, count as our dual form does; a seed-form pq_sig that does not
// verify leaves the author uncounted.
func TestPQSeedTagForm(t *testing.T) {
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
	r := relaytest.Start(t, []relay.Module{k.module(t)})
	now := r.Clock.Now().Unix()
	mallory := taskstest.NewAgent("mallory")
	author := k.sov[0]
	seedAct := func(content string, authorSig []string) *protocol.Event {
		tags := [][]string{{"scheme", governance.SchemeSeed}, {"p", mallory.ID}, append([]string{"pq_sig"}, authorSig...)}
		for _, c := range k.sov[1:] {
			tag, _ := protocol.Cosign(c.Key, governance.KindSovereignAct, content)
			pq, err := governance.PQSign(pqSK[c.ID], c.ID, governance.KindSovereignAct, content)
			if err != nil {
				t.Fatal(err)
			}
			tags = append(tags, tag, pq)
		}
		return author.Sign(governance.KindSovereignAct, now, content, tags...)
	}
	authorSig := func(content string) []string {
		ours, err := governance.PQSign(pqSK[author.ID], author.ID, governance.KindSovereignAct, content)
		if err != nil {
			t.Fatal(err)
		}
		return ours[2:] // the seed's form: the hex chunks, no agent id
	}
	// The sovereign set is 2-of-2: without the author's post-quantum
	// part the act is below its threshold.
	badContent := `{"act":"ban_agent","reason":"seed form, wrong message"}`
	bad := seedAct(badContent, authorSig(`{"act":"ban_agent","reason":"something else"}`))
	post(t, r, bad, 200, "")
	post(t, r, mallory.Sign(protocol.KindPost, now, "not banned yet"), 200, "")
	goodContent := `{"act":"ban_agent","reason":"seed form"}`
	good := seedAct(goodContent, authorSig(goodContent))
	post(t, r, good, 200, "")
	post(t, r, mallory.Sign(protocol.KindPost, now, "banned"), 403, governance.CodeBanned)

	var rows []struct {
		ID      string               `json:"id"`
		Ignored string               `json:"ignored"`
		PQ      []governance.PQCheck `json:"pq"`
	}
	getJSON(t, r, "/sovereign_log", &rows)
	why := map[string]string{}
	for _, row := range rows {
		var reasons []string
		for _, c := range row.PQ {
			reasons = append(reasons, c.AgentID[:8]+"="+c.Reason)
		}
		why[row.ID] = row.Ignored + ":" + strings.Join(reasons, ",")
	}
	if !strings.HasPrefix(why[bad.ID], "below_threshold:") || !strings.Contains(why[bad.ID], author.ID[:8]+"="+governance.PQBadSignature) {
		t.Fatalf("seed form over the wrong message: %s", why[bad.ID])
	}
	if strings.Contains(why[good.ID], "_") {
		t.Fatalf("seed form: %s", why[good.ID])
	}
}
