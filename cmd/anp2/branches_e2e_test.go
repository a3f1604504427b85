package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/anp2net/relay/trust"
)

// TestReplayBranchCLI: a relay process holds a rollback (a trusted core,
// a checkpoint, an attack, a proposal endorsed by four of six, a post
// after it, all dated in the last hours); `anp2 replay --branch` rebuilds
// main's and the pre-rollback branch's states from the relay's export and
// from its database and matches its GET /state?branch= (main's answered
// from the state the default views read, kept current as events commit,
// a revocation arriving before its target included), and the two
// branches' states differ.
func TestReplayBranchCLI(t *testing.T) {
	db := t.TempDir() + "/branches.db"
	p := startProc(t, db)
	base := time.Now().Unix() - 5*3600
	core := make([]taskstest.Agent, 6)
	for i := range core {
		core[i] = taskstest.NewAgent(fmt.Sprintf("e2e-core-%d", i))
	}
	var evs []*protocol.Event
	for i, a := range core {
		var tags [][]string
		for j, b := range core {
			if i != j {
				tags = append(tags, []string{"p", b.ID})
			}
		}
		evs = append(evs, a.Sign(6, base, `{"score":1}`, tags...), a.Sign(1, base, "core post"))
	}
	asOf := trust.EvalTime(base + 3700) // top(as_of) is taken at the whole hour: after the votes
	cp := fmt.Sprintf(`{"checkpoint_id":"cp-e2e","state_hash":"%064x","event_count":12,"as_of":%d}`, 1, asOf)
	evs = append(evs, core[0].Sign(12, asOf+60, cp, cosign(t, 12, cp, core[1], core[2])...))
	for i := 0; i < 20; i++ {
		s := taskstest.NewAgent(fmt.Sprintf("e2e-sybil-%d", i))
		evs = append(evs, s.Sign(1, asOf+1800, "spam"), s.Sign(6, asOf+1800, `{"score":-1}`, []string{"p", core[0].ID}))
	}
	rb := `{"target_checkpoint":"cp-e2e","reason":"attack"}`
	proposal := core[0].Sign(13, asOf+3600, rb, cosign(t, 13, rb, core[1], core[2], core[3])...)
	evs = append(evs, proposal, core[4].Sign(1, asOf+4000, "after the rollback"))
	cl := client.New(p.base)
	for _, e := range evs {
		if _, err := cl.Publish(context.Background(), e, false); err != nil {
			t.Fatalf("publish kind %d: %v", e.Kind, err)
		}
	}
	// The views default to main, which leaves the sybils' votes out; a
	// default view read also makes the relay build main's live state, so
	// GET /state?branch=main below answers from it. The build runs in the
	// background (readers never wait for it): poll until it is served.
	voters := func(query string) string {
		st, _, body := httpDo(t, "GET", p.base+"/trust/"+core[0].ID+query, nil)
		if st != 200 {
			t.Fatalf("GET /trust%s: %d %s", query, st, body)
		}
		return string(body)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		def := voters("")
		if strings.Contains(def, `"voter_count":5`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("voters of core 0 by default: %s", def)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		all := voters("?branch=all") // the relay's own trust snapshot refreshes in the background
		if strings.Contains(all, `"voter_count":25`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("voters of core 0 with all: %s", all)
		}
	}
	// main's live state now folds events as they commit: a batch holding a
	// revocation before the vote it revokes (as a mirror or an import of a
	// log in that order commits it), the voter's kept vote of the same
	// second already folded in, must leave the same state as the replay.
	voter := taskstest.NewAgent("e2e-revoking-voter")
	now := time.Now().Unix() - 120
	kept := voter.Sign(6, now, `{"score":1}`, []string{"p", core[5].ID})
	gone := voter.Sign(6, now, `{"score":1}`, []string{"p", core[4].ID})
	for _, e := range []*protocol.Event{core[0].Sign(6, now, `{"score":1}`, []string{"p", voter.ID}), kept} {
		if _, err := cl.Publish(context.Background(), e, false); err != nil {
			t.Fatalf("publish kind %d: %v", e.Kind, err)
		}
	}
	batch := fmt.Sprintf("[%s,%s]", protocol.AppendJSON(nil, voter.Sign(9, now, "", []string{"e", gone.ID})), protocol.AppendJSON(nil, gone))
	if st, _, body := httpDo(t, "POST", p.base+"/events/batch", []byte(batch)); st != 200 || !strings.Contains(string(body), `"accepted":2`) {
		t.Fatalf("batch: %d %s", st, body)
	}
	at := "--at=" + strconv.FormatInt(time.Now().Unix(), 10)
	digests := map[string]string{}
	for _, b := range []string{"main", "pre-rollback-" + proposal.ID[:8]} {
		for _, src := range []string{p.base, db} {
			out := runCLI(t, "replay", at, "--branch", b, "--compare", p.base, src)
			if !strings.Contains(out, "match: ") || !strings.Contains(out, "branch "+b+": ") {
				t.Fatalf("replay --branch %s %s: %s", b, src, out)
			}
			i := strings.LastIndex(out, `"digest": "`) // the branch state, printed last
			digests[b] = out[i : i+80]
		}
	}
	if len(digests) != 2 || digests["main"] == digests["pre-rollback-"+proposal.ID[:8]] {
		t.Fatalf("branch digests %v", digests)
	}
}

func cosign(t *testing.T, kind int64, content string, by ...taskstest.Agent) [][]string {
	var out [][]string
	for _, a := range by {
		tag, err := protocol.Cosign(a.Key, kind, content)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tag)
	}
	return out
}

// TestServePreferredBranch: `serve --branch b-…` serves that branch by
// default and announces it in its kind 10; a malformed --branch stops the
// command.
func TestServePreferredBranch(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command(binary, "serve", "--db", dir+"/bad.db", "--branch", "nope").CombinedOutput(); err == nil || !strings.Contains(string(out), "--branch") {
		t.Fatalf("serve --branch nope: %v %s", err, out)
	}
	p := startProc(t, dir+"/fork.db", "--branch", "b-deadbeef")
	a := taskstest.NewAgent("e2e-forker")
	now := time.Now().Unix()
	onFork := a.Sign(1, now, "on the fork", []string{"branch", "b-deadbeef"})
	onMain := a.Sign(1, now, "on main")
	cl := client.New(p.base)
	for _, e := range []*protocol.Event{onFork, onMain} {
		if _, err := cl.Publish(context.Background(), e, false); err != nil {
			t.Fatal(err)
		}
	}
	get := func(query string) string {
		st, _, body := httpDo(t, "GET", p.base+"/events?kinds=1&authors="+a.ID+query, nil)
		if st != 200 {
			t.Fatalf("GET /events%s: %d %s", query, st, body)
		}
		return string(body)
	}
	if body := get(""); !strings.Contains(body, onFork.ID) || strings.Contains(body, onMain.ID) {
		t.Fatalf("default branch: %s", body)
	}
	if body := get("&branch=main"); strings.Contains(body, onFork.ID) || !strings.Contains(body, onMain.ID) {
		t.Fatalf("main: %s", body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, body := httpDo(t, "GET", p.base+"/relays", nil)
		if strings.Contains(string(body), `"preferred_branch":"b-deadbeef"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("announcement: %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
