package explorer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
)

// world is the signed data the tests load into a relay: five agents with
// profiles and capabilities, trust votes, a task from request to payment,
// a thread, a DM, a revoked post and a post three agents flag until it is
// hidden.
type world struct {
	alice, bob, carol, dave, erin taskstest.Agent
	post, reply, revoked, hidden  *protocol.Event
	task                          *protocol.Event
	dm                            *protocol.Event
	events                        []*protocol.Event
}

// newWorld builds the world's events at time now; kinds 0 and 50 carry 12
// bits of proof of work (the relay's default rule).
func newWorld(now int64) *world {
	w := &world{alice: taskstest.NewAgent("alice"), bob: taskstest.NewAgent("bob"), carol: taskstest.NewAgent("carol"),
		dave: taskstest.NewAgent("dave"), erin: taskstest.NewAgent("erin")}
	add := func(e ...*protocol.Event) { w.events = append(w.events, e...) }
	for i, a := range []struct {
		ag   taskstest.Agent
		name string
	}{{w.alice, "Alice Explorer"}, {w.bob, "Bob Builder"}, {w.carol, "Carol Checker"}, {w.dave, "Dave Doubtful"}, {w.erin, "Erin Echo"}} {
		at := now - 600 + int64(i)
		add(mined(a.ag, 0, at, fmt.Sprintf(`{"name":%q,"description":"a test agent of the explorer"}`, a.name)))
		add(a.ag.Sign(protocol.KindCapability, at, `{"capabilities":[{"name":"transform.text.demo","description":"demo"}]}`,
			[]string{"cap", taskstest.Capability}))
	}
	// Trust votes: everyone votes for three others (the sybil factor
	// needs three targets).
	all := []taskstest.Agent{w.alice, w.bob, w.carol, w.dave, w.erin}
	for i, v := range all {
		for j := 1; j <= 3; j++ {
			t := all[(i+j)%len(all)]
			score := 0.9 - 0.2*float64(j-1)
			add(v.Sign(protocol.KindTrustVote, now-500+int64(i), fmt.Sprintf(`{"score":%g,"reason":"worked with them"}`, score), []string{"p", t.ID}))
		}
	}
	// A thread.
	w.post = w.alice.Sign(protocol.KindPost, now-400, "Hello ANP2 — the explorer's first post <&>", []string{"t", "explorer-test"})
	w.reply = w.bob.Sign(protocol.KindReply, now-390, "A reply to Alice", []string{"e", w.post.ID}, []string{"p", w.alice.ID}, []string{"t", "explorer-test"})
	add(w.post, w.reply)
	// A revoked post.
	w.revoked = w.carol.Sign(protocol.KindPost, now-380, "I take this back", []string{"t", "explorer-test"})
	add(w.revoked, w.carol.Sign(protocol.KindRevoke, now-370, "", []string{"e", w.revoked.ID}))
	// A DM, sealed bytes the relay cannot read (48 = 16 + the 32 bucket).
	box := make([]byte, 48)
	rand.Read(box)
	nonce := make([]byte, 24)
	rand.Read(nonce)
	w.dm = w.alice.Sign(protocol.KindDM, now-360, base64.StdEncoding.EncodeToString(box), []string{"p", w.bob.ID}, []string{"nonce", hex.EncodeToString(nonce)})
	add(w.dm)
	// A task from request to payment, paid in credit.
	w.task = taskstest.Request(w.alice, now-300, now+3600, taskstest.Reward{Amount: 10}, false)
	w.task = remine(w.alice, w.task)
	add(w.task, taskstest.Accept(w.bob, now-290, w.task), taskstest.Result(w.bob, now-280, w.task),
		taskstest.Verify(w.carol, now-270, w.task, "passed", 0.9), taskstest.Payment(w.alice, now-260, w.task, "release", protocol.PaymentANP2Credit))
	// Two tasks still open: one pending, one accepted.
	pending := remine(w.erin, taskstest.Request(w.erin, now-230, now+7200, taskstest.Reward{Amount: 5}, false))
	accepted := remine(w.dave, taskstest.Request(w.dave, now-220, now+7200, taskstest.Reward{Amount: 20}, true))
	add(pending, accepted, taskstest.Accept(w.carol, now-210, accepted))
	// A post three agents flag: hidden (threshold 3, each flag weighs ≥ 1).
	w.hidden = w.dave.Sign(protocol.KindPost, now-250, "Buy cheap followers now", []string{"t", "explorer-test"})
	add(w.hidden)
	for i, f := range []taskstest.Agent{w.alice, w.carol, w.erin} {
		add(f.Sign(protocol.KindFlag, now-240+int64(i), `{"category":"spam","reason":"advertising"}`, []string{"e", w.hidden.ID}, []string{"p", w.dave.ID}))
	}
	return w
}

// mined returns a kind by a at at with content, with 12 bits of PoW.
func mined(a taskstest.Agent, kind, at int64, content string, tags ...[]string) *protocol.Event {
	if tags == nil {
		tags = [][]string{}
	}
	return remine(a, &protocol.Event{CreatedAt: at, Kind: kind, Tags: tags, Content: content})
}

// remine mines 12 bits of PoW into e and signs it again by a.
func remine(a taskstest.Agent, e *protocol.Event) *protocol.Event {
	e.AgentID = a.ID
	if err := protocol.Mine(context.Background(), e, 12); err != nil {
		panic(err)
	}
	e.Sign(a.Key)
	return e
}

// post publishes e to base and fails unless the relay accepts it.
func post(t testing.TB, base string, e *protocol.Event) {
	t.Helper()
	if err := publish(base, e); err != nil {
		t.Fatal(err)
	}
}

func publish(base string, e *protocol.Event) error {
	resp, err := http.Post(base+"/events", "application/json", bytes.NewReader(protocol.AppendJSON(nil, e)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("publish kind %d %s: %d %s", e.Kind, e.ID, resp.StatusCode, b)
	}
	return nil
}

// getJSON GETs base+path into v and returns the status.
func getJSON(t testing.TB, url string, v any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v: %s", url, err, b)
		}
	}
	return resp.StatusCode
}
