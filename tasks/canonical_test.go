package tasks

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/anp2net/relay/protocol"
	tt "github.com/anp2net/relay/tasks/taskstest"
	"github.com/gowebpki/jcs"
)

func viaJCS(t *testing.T, v TaskView) []byte {
	t.Helper()
	v.Reward, v.Constraints = nil, nil
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jcs.Transform(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCanonicalMatchesJCS checks the hand-written canonical form of views
// against json.Marshal + jcs.Transform, over random lifecycles and hostile
// strings.
func TestCanonicalMatchesJCS(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	f := New(tt.Weight)
	for _, e := range tt.Lifecycles(rng, tt.Pool(8), 60, t0) {
		f.Add(e)
	}
	// A request whose capability and payment strings hold characters JSON
	// encoders disagree on.
	odd := "a\u2028b\u2029<&>\"\\\x01\x1f\x7f é 🙂"
	req := reqr.Sign(protocol.KindTaskRequest, t0, `{"capability":"`+jsonEscape(odd)+`","input":1,"constraints":{"max_cost_usd":"1","deadline_unix":`+itoa(deadline)+`},"reward":{"currency":"USD","amount":1e-7,"payment_method":"mocked"}}`,
		[]string{"t", odd}, []string{"cap_wanted", odd})
	f.Add(req)
	f.Add(tt.Accept(prov, t0+1, req))
	f.Add(prov.Sign(protocol.KindTaskResult, t0+2, `{"output":1,"output_format":"`+jsonEscape(odd)+`"}`,
		[]string{"e", req.ID, "root"}, []string{"e", req.ID, "result"}, []string{"e", req.ID, "accept"}, []string{"p", reqr.ID}))
	f.Add(reqr.Sign(protocol.KindPayment, t0+3, `{"disposition":"refund","payment_method":"mocked","tx_hash":"`+jsonEscape(odd)+`","payment_proof_url":"x","currency":"€","amount":0.000001}`,
		[]string{"e", req.ID, "root"}, []string{"e", req.ID, "payment"}, []string{"p", prov.ID}))
	if _, ok := f.Task(req.ID, t0, nil); !ok {
		t.Fatal("odd request rejected")
	}
	n := 0
	for _, now := range probeTimes {
		for _, w := range []WeightFunc{nil, tt.Weight} {
			for _, v := range f.List(Filter{}, now, w) {
				c := &canon{}
				c.taskView(&v)
				if want := viaJCS(t, v); !bytes.Equal(c.b, want) {
					t.Fatalf("canonical form differs\n got %s\nwant %s", c.b, want)
				}
				n++
			}
		}
	}
	// And the whole digest against the slow path.
	for _, now := range probeTimes {
		views := f.List(Filter{}, now, f.weight)
		for i := range views {
			views[i].Reward, views[i].Constraints = nil, nil
		}
		sort.Slice(views, func(i, j int) bool { return views[i].TaskID < views[j].TaskID })
		if f.Digest(now) != CanonicalDigest(digestDoc{Now: now, Tasks: views, Version: DigestVersion}) {
			t.Fatalf("digest at %d differs from jcs.Transform of the document", now)
		}
	}
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
