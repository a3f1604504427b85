package branches_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/branches"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// vouchingCore publishes n agents that vote for each other.
func vouchingCore(w *world, n int) []taskstest.Agent {
	core := make([]taskstest.Agent, n)
	for i := range core {
		core[i] = taskstest.NewAgent(fmt.Sprintf("core-%d", i))
	}
	for i, a := range core {
		var tags [][]string
		for j, b := range core {
			if i != j {
				tags = append(tags, []string{"p", b.ID})
			}
		}
		w.post(a.Sign(6, w.now(), `{"score":1}`, tags...))
	}
	return core
}

// TestBanRefusesPublish: a ban endorsed by three of the high-trust set
// refuses the banned agent's new events with 403 agent_banned, keeps its past ones and stops counting its votes and
// flags; a ban endorsed by two, or by
// agents outside the set, changes nothing.
func TestBanRefusesPublish(t *testing.T) {
	w := &world{t: t, r: relaytest.Start(t, []relay.Module{newModule()})}
	core := vouchingCore(w, 6)
	w.r.Clock.Add(time.Hour) // the high-trust set is taken at the whole hour
	spammer, other := taskstest.NewAgent("spammer"), taskstest.NewAgent("other")
	past := spammer.Sign(1, w.now(), "spam")
	hello := other.Sign(1, w.now(), "hello")
	w.post(past, hello,
		spammer.Sign(6, w.now(), `{"score":1}`, []string{"p", other.ID}),
		spammer.Sign(7, w.now(), `{"category":"spam"}`, []string{"e", hello.ID}, []string{"p", other.ID}))
	w.r.Clock.Add(time.Minute)
	counted := func() (voters, flagWeight float64) {
		var tr struct {
			VoterCount float64 `json:"voter_count"`
		}
		var fl struct {
			FlagWeight float64 `json:"flag_weight"`
		}
		w.get("/trust/"+other.ID, &tr)
		w.get("/events/"+hello.ID+"/flags", &fl)
		return tr.VoterCount, fl.FlagWeight
	}
	relaytest.Eventually(t, "the spammer's vote and flag count before the ban", func() bool {
		v, f := counted()
		return v == 1 && f > 0
	})

	banOf := func(a taskstest.Agent) string {
		return fmt.Sprintf(`{"agent_id":%q,"reason":"spam"}`, a.ID)
	}
	weak := core[0].Sign(14, w.now(), banOf(other), cosigns(t, 14, banOf(other), core[1])...)
	strong := core[0].Sign(14, w.now(), banOf(spammer), cosigns(t, 14, banOf(spammer), core[1], core[2], taskstest.NewAgent("outsider"))...)
	w.post(weak, strong)
	w.r.Clock.Add(time.Minute)

	a := w.r.Post(t, spammer.Sign(1, w.now(), "more spam"))
	if a.Status != 403 || a.Code(t) != branches.CodeAgentBanned {
		t.Fatalf("banned publish: %d %s", a.Status, a.Body)
	}
	w.post(other.Sign(1, w.now(), "still here"))
	relaytest.Eventually(t, "the banned agent's vote and flag stop counting", func() bool {
		v, f := counted()
		return v == 0 && f == 0
	})
	if g := w.r.Do(t, "GET", "/events/"+past.ID, "", nil); g.Status != 200 {
		t.Fatalf("past event: %d", g.Status)
	}
	var bans []branches.BanView
	w.get("/bans", &bans)
	if len(bans) != 2 {
		t.Fatalf("bans %+v", bans)
	}
	for _, b := range bans {
		if b.ID == strong.ID && (!b.Valid || b.Endorsed != 3) || b.ID == weak.ID && b.Valid {
			t.Fatalf("ban %+v", b)
		}
	}
}
