package governance

import (
	"crypto/ed25519"
	"crypto/sha256"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// FuzzJudge judges hostile kind 21 and 30 events (any content, any tags):
// it must never panic, an act is valid only with the threshold met, and
// the sovereign state must be computable at any time.
func FuzzJudge(f *testing.F) {
	f.Add(int64(30), `{"act":"freeze_network","target":"global"}`, "p", "00", int64(0))
	f.Add(int64(30), `{"act":"ban_agent"}`, "cosign", "zz", int64(5))
	f.Add(int64(21), `{"effective_at":1e300}`, "relay", "", int64(-1))
	f.Add(int64(30), `{"act":"revoke_relay","target":"https://x"}`, "relay", "https://y", int64(1<<62))
	f.Add(int64(30), `not json`, "e", "", int64(0))
	f.Add(int64(31), `{"new_stewards":["x"],"multisig_threshold":1e9}`, "p", "", int64(0))
	seed := sha256.Sum256([]byte("fuzz-seed"))
	key := ed25519.NewKeyFromSeed(seed[:])
	o, _ := Options{SeedKeys: []string{protocol.AgentIDOf(key)}, SeedThreshold: 1}.normalize()
	f.Fuzz(func(t *testing.T, kind int64, content, tagName, tagValue string, at int64) {
		if kind != KindSeedDestruct && kind != KindDeadMan {
			kind = KindSovereignAct
		}
		e := &protocol.Event{Kind: kind, CreatedAt: 1763800000, Content: content,
			Tags: [][]string{{tagName, tagValue}, {"cosign", tagValue, tagValue}}}
		e.Sign(key)
		j := o.judge([]*protocol.Event{e, e}, map[string][]int64{})
		for _, a := range j.acts {
			if a.Valid && len(a.SeedSigners) < o.SeedThreshold {
				t.Fatalf("valid below threshold: %+v", a)
			}
			if !a.Valid && a.Ignored == "" {
				t.Fatalf("ignored without a reason: %+v", a)
			}
		}
		o.sovereignAt(j, at)
	})
}

// FuzzPIP derives proposals from hostile kind 20s: never a panic, and an
// owner's self-declared accepted never counts.
func FuzzPIP(f *testing.F) {
	f.Add(`{"pip_number":"PIP-1","reference_impl":"x"}`, "discussion", `{"pip_number":"PIP-1"}`, "accepted")
	f.Add(`{"pip_number":12,"schemas":{"a":{}}}`, "", `{"pip_number":12.5}`, "final-call")
	f.Add(`{"pip_number":""}`, "withdrawn", `[]`, "draft")
	seed := sha256.Sum256([]byte("fuzz-pip"))
	key := ed25519.NewKeyFromSeed(seed[:])
	f.Fuzz(func(t *testing.T, c1, s1, c2, s2 string) {
		p := newPipSet()
		for i, cs := range [][2]string{{c1, s1}, {c2, s2}} {
			e := &protocol.Event{Kind: KindPIP, CreatedAt: int64(1000 + i), Content: cs[0], Tags: [][]string{{"status", cs[1]}}}
			e.Sign(key)
			p.add(e)
		}
		for _, r := range p.records() {
			if r.Declared == StatusAccepted || r.Declared == StatusRejected {
				t.Fatalf("declared %s counted", r.Declared)
			}
			Evaluate(r, 1e9, Trusted{protocol.AgentIDOf(key): 1})
		}
		p.digest(0)
	})
}

// FuzzSchemaValidate validates hostile content and hostile schemas: never
// a panic, and a failure always has a located path under the schema name.
func FuzzSchemaValidate(f *testing.F) {
	f.Add(builtinSchemas["anp.heartbeat.v1"], `{"v":1,"st":"ok","q":1}`)
	f.Add(builtinSchemas["anp.heartbeat.v1"], `{"v":"1","st":"x","q":-1,"a~/b":2}`)
	f.Add(`{"properties":{"a/b":{"type":"string"}}}`, `{"a/b":1}`)
	f.Add(`{"pattern":"(a+)+$"}`, `"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"`)
	f.Fuzz(func(t *testing.T, schema, content string) {
		s, _ := compileSchema("fuzz", []byte(schema))
		if s == nil {
			return
		}
		for _, fe := range validate(&SchemaDef{Name: "n", compiled: s}, content) {
			if len(fe.Loc) < 3 || fe.Loc[2] != "n" || fe.Msg == "" {
				t.Fatalf("bad failure %+v", fe)
			}
		}
	})
}
