package branches_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/anp2net/relay/tasks/taskstest"
)

// TestServedBranches: the relay's kind 10 lists every branch it can
// answer for — main alone at first; after a rollback and a voluntary fork
// main, the pre-rollback branch and the fork — and GET /relays shows it.
func TestServedBranches(t *testing.T) {
	r, fed := federated(t, "announcer")
	w := &world{t: t, r: r}
	served := func() []string {
		if err := fed.Announce(context.Background()); err != nil {
			t.Fatal(err)
		}
		var out struct {
			Relays []struct {
				Preferred string   `json:"preferred_branch"`
				Served    []string `json:"served_branches"`
			} `json:"relays"`
		}
		w.get("/relays", &out)
		rows := out.Relays
		if len(rows) != 1 || rows[0].Preferred != "main" {
			t.Fatalf("relays %+v", rows)
		}
		return rows[0].Served
	}
	if got := served(); !slices.Equal(got, []string{"main"}) {
		t.Fatalf("served before any rollback: %v", got)
	}
	rb := rollBack(w, 5)
	w.post(taskstest.NewAgent("forker").Sign(1, w.now(), "on a fork", []string{"branch", "b-0123abcd"}))
	w.r.Clock.Add(time.Minute)
	if got, want := served(), []string{"main", rb.pre, "b-0123abcd"}; !slices.Equal(got, want) {
		t.Fatalf("served after the rollback: %v, want %v", got, want)
	}
}
