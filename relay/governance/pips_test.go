package governance_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/governance"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

type pipAnswer struct {
	Number       string  `json:"pip_number"`
	Status       string  `json:"status"`
	Declared     string  `json:"declared_status"`
	Days         float64 `json:"days_in_discussion"`
	Supporters   []string
	Requirements struct {
		Discussion bool `json:"discussion_period_met"`
		Impl       bool `json:"reference_impl_present"`
		Threshold  bool `json:"threshold_met"`
	} `json:"requirements"`
	Approval struct {
		Weight    float64 `json:"approval_weight"`
		Threshold float64 `json:"approval_threshold"`
		Ratio     float64 `json:"approval_ratio"`
	} `json:"approval"`
	History []governance.Transition `json:"history"`
	Thread  []protocol.Event        `json:"thread"`
}

func pipContent(n, impl string) string {
	b, _ := json.Marshal(map[string]any{"pip_number": n, "title": "proposal " + n, "motivation": "m",
		"specification": "s", "backwards_compat": "none", "reference_impl": impl})
	return string(b)
}

func cosigns(t *testing.T, content string, who ...taskstest.Agent) [][]string {
	var out [][]string
	for _, a := range who {
		tag, err := protocol.Cosign(a.Key, governance.KindPIP, content)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tag)
	}
	return out
}

func getPIP(t *testing.T, r *relaytest.Relay, n string) pipAnswer {
	t.Helper()
	var p pipAnswer
	getJSON(t, r, "/pips/"+n, &p)
	return p
}

// TestPIPLifecycle walks proposals through a real relay with a controlled
// clock: one reaches acceptance after 14 days of discussion with three
// quarters of the trusted weight and a reference implementation; one
// fails its threshold and is rejected when its final call ends; one
// without a reference implementation stays in discussion; one is
// withdrawn; a self-declared "accepted" is ignored.
func TestPIPLifecycle(t *testing.T) {
	r := start(t, newKeys())
	t0 := r.Clock.Now().Unix()
	var trusted []taskstest.Agent
	for _, n := range []string{"pa", "pb", "pc", "pd"} {
		trusted = append(trusted, taskstest.NewAgent(n))
	}
	a, b, c, d := trusted[0], trusted[1], trusted[2], trusted[3]
	// Three voters trust the four agents equally.
	for _, vn := range []string{"v1", "v2", "v3"} {
		v := taskstest.NewAgent(vn)
		for _, x := range trusted {
			post(t, r, v.Sign(protocol.KindTrustVote, t0, map[string]any{"score": 1}, []string{"p", x.ID}), 200, "")
		}
	}
	c1 := pipContent("PIP-001", "https://example.org/impl")
	post(t, r, a.Sign(governance.KindPIP, t0, c1, []string{"status", "draft"}), 200, "")
	disc := a.Sign(governance.KindPIP, t0+1, c1, append([][]string{{"status", "discussion"}}, cosigns(t, c1, c)...)...)
	post(t, r, disc, 200, "")
	post(t, r, d.Sign(governance.KindPIP, t0+2, c1, append([][]string{{"status", "accepted"}}, cosigns(t, c1, b)...)...), 200, "")
	post(t, r, a.Sign(governance.KindPIP, t0+3, c1, []string{"status", "accepted"}), 200, "")
	reply := c.Sign(protocol.KindReply, t0+4, "I support this", []string{"e", disc.ID})
	post(t, r, reply, 200, "")

	c2 := pipContent("PIP-002", "https://example.org/impl2")
	post(t, r, b.Sign(governance.KindPIP, t0, c2, []string{"status", "discussion"}), 200, "")
	post(t, r, b.Sign(governance.KindPIP, t0+5, c2, append([][]string{{"status", "final-call"}}, cosigns(t, c2, a)...)...), 200, "")
	c3 := pipContent("PIP-003", "")
	post(t, r, c.Sign(governance.KindPIP, t0, c3, append([][]string{{"status", "discussion"}}, cosigns(t, c3, a, b, d)...)...), 200, "")
	c4 := pipContent("PIP-004", "x")
	post(t, r, d.Sign(governance.KindPIP, t0, c4, []string{"status", "draft"}), 200, "")
	post(t, r, d.Sign(governance.KindPIP, t0+1, c4, []string{"status", "withdrawn"}), 200, "")

	p1 := getPIP(t, r, "PIP-001")
	if p1.Status != "discussion" || len(p1.Supporters) != 4 || !p1.Requirements.Threshold || p1.Requirements.Discussion ||
		len(p1.Thread) != 1 || p1.Thread[0].ID != reply.ID {
		t.Fatalf("PIP-001 at day 0: %+v", p1)
	}
	ignored := map[string]string{}
	for _, h := range p1.History {
		ignored[h.EventID+h.Status] = h.Ignored
	}
	if len(p1.History) != 4 || ignored[disc.ID+"discussion"] != "" {
		t.Fatalf("history: %+v", p1.History)
	}
	for _, h := range p1.History {
		if h.Status == "accepted" && h.Ignored == "" {
			t.Fatalf("a declared accepted counted: %+v", h)
		}
	}

	r.Clock.Add(14*24*time.Hour + 10*time.Second)
	p1 = getPIP(t, r, "PIP-001")
	if p1.Status != "accepted" || p1.Days < 14 || p1.Approval.Ratio != 1 {
		t.Fatalf("PIP-001 after 14 days: %+v", p1)
	}
	p2 := getPIP(t, r, "PIP-002")
	if p2.Status != "rejected" || p2.Requirements.Threshold || p2.Approval.Ratio != 0.5 {
		t.Fatalf("PIP-002: %+v", p2)
	}
	if p3 := getPIP(t, r, "PIP-003"); p3.Status != "discussion" || p3.Requirements.Impl || !p3.Requirements.Threshold {
		t.Fatalf("PIP-003: %+v", p3)
	}
	if p4 := getPIP(t, r, "PIP-004"); p4.Status != "withdrawn" {
		t.Fatalf("PIP-004: %+v", p4)
	}
	var list struct {
		Count int         `json:"count"`
		Total int         `json:"total"`
		PIPs  []pipAnswer `json:"pips"`
	}
	getJSON(t, r, "/pips?status=accepted", &list)
	if list.Count != 1 || list.Total != 4 || list.PIPs[0].Number != "PIP-001" {
		t.Fatalf("accepted list: %+v", list)
	}
	for path, code := range map[string]int{"/pips/PIP-999": 404, "/pips?status=bogus": 400, "/pips?x=1": 400} {
		if ans := r.Do(t, "GET", path, "", nil); ans.Status != code {
			t.Fatalf("%s: %d %s", path, ans.Status, ans.Body)
		}
	}
}
