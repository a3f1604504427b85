package views_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/anp2net/relay/trust"
)

// TestOverrideCosignaturesVerified: a kind 7 override's cosigners count
// toward |sign| (seed §7.5) when their ["cosign", agent_id, sig] verifies
// over the flag's kind and content, with no override of their own; a
// forged signature and the flagged event's author never count.
func TestOverrideCosignaturesVerified(t *testing.T) {
	r := relaytest.Start(t, nil)
	ag := taskstest.Pool(9)
	author, over, c1, c2, forger := ag[0], ag[1], ag[2], ag[3], ag[4]
	at := int64(relaytest.VectorTime - 600)
	target := author.Sign(protocol.KindPost, at, "a post")
	evs := []*protocol.Event{target}
	for _, v := range ag[5:] { // the overrider is the only trusted agent: rank 1, the top 5%
		evs = append(evs, v.Sign(protocol.KindTrustVote, at+1, map[string]any{"score": 1}, []string{"p", over.ID}))
	}
	content := `{"category":"override","reason":"not spam"}`
	tags := [][]string{{"e", target.ID}, {"p", author.ID}}
	for _, c := range []taskstest.Agent{c1, c2, author} {
		tag, err := protocol.Cosign(c.Key, protocol.KindFlag, content)
		if err != nil {
			t.Fatal(err)
		}
		tags = append(tags, tag)
	}
	forged, _ := protocol.Cosign(forger.Key, protocol.KindFlag, `{"category":"override","reason":"other"}`)
	tags = append(tags, forged)
	override := over.Sign(protocol.KindFlag, at+2, content, tags...)
	evs = append(evs, override)
	r.PostAll(t, evs, 1)

	var em trust.EventModeration
	relaytest.Eventually(t, "the override's sign", func() bool {
		ans := r.Do(t, "GET", "/events/"+target.ID+"/flags", "", nil)
		if ans.Status != 200 || json.Unmarshal(ans.Body, &em) != nil || len(em.Flags) != 1 {
			return false
		}
		return em.Flags[0].Sign != 1
	})
	f := em.Flags[0]
	slices.Sort(f.Cosigners)
	want := []string{c1.ID, c2.ID}
	slices.Sort(want)
	if f.Sign != -3 || !slices.Equal(f.Cosigners, want) {
		t.Fatalf("override sign %v, cosigners %v; want −3 and %v", f.Sign, f.Cosigners, want)
	}
}
