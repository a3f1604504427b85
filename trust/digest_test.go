package trust

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/gowebpki/jcs"
)

// The digests used to be computed by building the documents below as Go
// values and running json.Marshal + jcs.Transform over them. That path is
// kept here as the oracle: the direct writer (canonical.go, digest.go) must
// produce the same bytes.

type oracleVote struct {
	From      string  `json:"from"`
	To        string  `json:"to"`
	Score     float64 `json:"score"`
	CreatedAt int64   `json:"created_at"`
	EventID   string  `json:"event_id"`
}

type oracleTrustDocument struct {
	View       string       `json:"view"`
	Now        int64        `json:"now"`
	Iterations int          `json:"iterations"`
	Converged  bool         `json:"converged"`
	Agents     []Summary    `json:"agents"`
	Votes      []oracleVote `json:"votes"`
}

func (s *Snapshot) oracleDocument() oracleTrustDocument {
	doc := oracleTrustDocument{View: Algorithm, Now: s.Now, Iterations: s.Iterations, Converged: s.Converged,
		Agents: s.sum, Votes: make([]oracleVote, 0, len(s.votes))}
	if doc.Agents == nil {
		doc.Agents = []Summary{}
	}
	for t := range s.sum {
		for _, v := range s.votes[s.vstart[t]:s.vstart[t+1]] {
			doc.Votes = append(doc.Votes, oracleVote{From: v.From, To: s.sum[t].AgentID,
				Score: round6(v.Score), CreatedAt: v.CreatedAt, EventID: v.EventID})
		}
	}
	return doc
}

type oracleModerationDocument struct {
	View          string             `json:"view"`
	Now           int64              `json:"now"`
	ActiveAgents  int                `json:"active_agents"`
	HideThreshold float64            `json:"hide_threshold"`
	Events        []*EventModeration `json:"events"`
}

func (s *ModSnapshot) oracleDocument() oracleModerationDocument {
	doc := oracleModerationDocument{View: "moderation.v1", Now: s.Now, ActiveAgents: s.ActiveAgents,
		HideThreshold: s.HideThreshold, Events: make([]*EventModeration, 0, len(s.events))}
	for _, em := range s.events {
		doc.Events = append(doc.Events, em)
	}
	slices.SortFunc(doc.Events, func(a, b *EventModeration) int { return strings.Compare(a.EventID, b.EventID) })
	return doc
}

// oracleJCS returns jcs.Transform(json.Marshal(v)).
func oracleJCS(t testing.TB, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		t.Fatalf("jcs: %v", err)
	}
	return canon
}

// written returns the whole document write produces, unhashed.
func written(write func(*canon)) []byte {
	c := canon{}
	write(&c)
	return c.b
}

// checkDigests requires both views' writers to match the oracle byte for
// byte at now, and Digest to hash those bytes.
func checkDigests(t *testing.T, v views, now int64) {
	t.Helper()
	ts, ms := v.g.Compute(now), v.m.Compute(now)
	for _, c := range []struct {
		name   string
		got    []byte
		want   []byte
		digest [32]byte
	}{
		{"trust", written(ts.writeDigest), oracleJCS(t, ts.oracleDocument()), v.g.Digest(now)},
		{"moderation", written(ms.writeDigest), oracleJCS(t, ms.oracleDocument()), v.m.Digest(now)},
	} {
		if !bytes.Equal(c.got, c.want) {
			i := firstDiff(c.got, c.want)
			t.Fatalf("%s document at %d differs at byte %d:\n got  …%s\n want …%s", c.name, now, i, around(c.got, i), around(c.want, i))
		}
		if c.digest != sha256.Sum256(c.want) {
			t.Fatalf("%s digest is not SHA-256 of the canonical document", c.name)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func around(b []byte, i int) string { return string(b[max(0, i-60):min(len(b), i+60)]) }

// TestDigestMatchesJCS checks the writer against the oracle on the property
// tests' random streams (posts, votes, flags, appeals, cosigned overrides,
// revocations), at times that catch pending and debounced changes.
func TestDigestMatchesJCS(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		s := randomStream(seed)
		v := newViews()
		for _, e := range s.events {
			if !s.revoked[e.ID] {
				v.add(e)
			}
		}
		nows := []int64{t0 - 400*86400, t0 - 86400, t0 + 3600, t0 + 4*86400}
		for _, p := range s.posts[:4] {
			nows = append(nows, p.CreatedAt+2400, p.CreatedAt+7200)
		}
		for _, now := range nows {
			checkDigests(t, v, now)
		}
	}
	checkDigests(t, newViews(), t0) // empty views
}

// TestDigestMatchesJCSLarge checks the writer at a scale where it flushes
// to the hash many times (5k votes, 2k flags).
func TestDigestMatchesJCSLarge(t *testing.T) {
	v := newViews()
	r := rand.New(rand.NewPCG(9, 10))
	for i := range 5000 {
		v.add(benchVote(r, i, t0))
	}
	for i := range 20_000 {
		v.add(benchModEvent(i))
	}
	checkDigests(t, v, t0)
}

// hostileEvents returns a random set of votes, flags and posts among a few
// agents whose ids, event ids and reasons are built from text: the views
// do not verify events, so any string can reach a digest.
func hostileEvents(seed uint64, text string) []*protocol.Event {
	r := rand.New(rand.NewPCG(seed, 13))
	hexAgents := []string{fakeID("h", 0), fakeID("h", 1), fakeID("h", 2), fakeID("h", 3)}
	author := func() string {
		if r.IntN(3) == 0 {
			return text + strconv.Itoa(r.IntN(3))
		}
		return hexAgents[r.IntN(len(hexAgents))]
	}
	when := func() int64 { return t0 - int64(r.IntN(10))*3000 }
	var evs, posts []*protocol.Event
	for i := range 6 {
		p := &protocol.Event{ID: fakeID("hp"+text, i), AgentID: author(), CreatedAt: when(), Kind: protocol.KindPost}
		posts = append(posts, p)
		evs = append(evs, p)
	}
	for i := range 30 {
		score := strconv.FormatFloat(r.Float64()*2-1, 'g', -1, 64)
		if r.IntN(4) == 0 {
			score = []string{"0", "1", "-1", "1e-7", "-0.0000005", "0.3333333333"}[r.IntN(6)]
		}
		reason, _ := json.Marshal(text)
		evs = append(evs, &protocol.Event{ID: text + "vote" + strconv.Itoa(i), AgentID: author(), CreatedAt: when(),
			Kind: protocol.KindTrustVote, Content: `{"score":` + score + `,"reason":` + string(reason) + `}`,
			Tags: [][]string{{"p", hexAgents[r.IntN(len(hexAgents))]}}})
	}
	categories := []string{"spam", "override", "appeal", "disinfo"}
	for i := range 30 {
		content, _ := json.Marshal(map[string]string{"category": categories[r.IntN(len(categories))], "reason": text})
		tags := [][]string{{"e", posts[r.IntN(len(posts))].ID}}
		if r.IntN(2) == 0 {
			tags = append(tags, []string{"cosign", hexAgents[r.IntN(len(hexAgents))]}, []string{"override", "true"})
		}
		evs = append(evs, &protocol.Event{ID: text + "flag" + strconv.Itoa(i), AgentID: author(),
			CreatedAt: posts[0].CreatedAt + int64(r.IntN(6))*1500, Kind: protocol.KindFlag, Content: string(content), Tags: tags})
	}
	// Make agent 0 the top-ranked one, so its overrides weigh.
	for i, a := range hexAgents[1:] {
		evs = append(evs, &protocol.Event{ID: fakeID("top", i), AgentID: a, CreatedAt: t0, Kind: protocol.KindTrustVote,
			Content: `{"score":1}`, Tags: [][]string{{"p", hexAgents[0]}}})
	}
	return evs
}

// FuzzDigestMatchesJCS checks the writer against the oracle over random
// vote and flag sets whose strings come from the fuzzer.
func FuzzDigestMatchesJCS(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "ctl\x00\x01\x1f\x7f\t\n\r\b\f",
		"<html> & \u2028\u2029", "é日本🎉", "bad\xff\xfe utf8 \xed\xa0\x80", "\"\\u0000"} {
		f.Add(uint64(len(s)), s)
	}
	f.Fuzz(func(t *testing.T, seed uint64, text string) {
		v := newViews()
		v.add(hostileEvents(seed, text)...)
		for _, now := range []int64{t0 - 20000, t0, t0 + 7200, 1 << 60} {
			checkDigests(t, v, now)
		}
	})
}

// Digest benchmarks at 100k votes among 20k agents (the trust snapshot) and
// 20k flags on 10k events among 200k events (the moderation snapshot): the
// direct writer, and the old json.Marshal + jcs.Transform path for
// comparison. Compute is outside the timed loop.

func BenchmarkSnapshotDigest(b *testing.B) {
	s := benchGraph().Compute(t0)
	b.Run("writer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.Digest()
		}
		b.ReportMetric(float64(len(written(s.writeDigest))), "docB")
	})
	b.Run("jcs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sha256.Sum256(oracleJCS(b, s.oracleDocument()))
		}
	})
}

func BenchmarkModSnapshotDigest(b *testing.B) {
	g := benchGraph()
	m := NewModeration(g, ModerationOptions{})
	for i := range 200_000 {
		m.Add(benchModEvent(i))
	}
	s := m.compute(g.Compute(t0))
	b.Run("writer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.Digest()
		}
		b.ReportMetric(float64(len(written(s.writeDigest))), "docB")
	})
	b.Run("jcs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sha256.Sum256(oracleJCS(b, s.oracleDocument()))
		}
	})
}

// TestEmptyDocuments pins the document shapes of empty views.
func TestEmptyDocuments(t *testing.T) {
	v := newViews()
	if got, want := string(written(v.g.Compute(t0).writeDigest)), fmt.Sprintf(`{"agents":[],"converged":true,"iterations":1,"now":%d,"view":"trust.v1","votes":[]}`, t0); got != want {
		t.Errorf("trust:\n got %s\nwant %s", got, want)
	}
	if got, want := string(written(v.m.Compute(t0).writeDigest)), fmt.Sprintf(`{"active_agents":0,"events":[],"hide_threshold":3,"now":%d,"view":"moderation.v1"}`, t0); got != want {
		t.Errorf("moderation:\n got %s\nwant %s", got, want)
	}
}

// TestEventModerationShapes checks nil lists (null, as json.Marshal writes
// them), omitempty fields and a pending change against the oracle.
func TestEventModerationShapes(t *testing.T) {
	for _, em := range []*EventModeration{
		{EventID: "a"},
		{EventID: "b", Author: "x", Visibility: Hidden, FlagWeight: 3.5, HideThreshold: 3, FlagCount: 2,
			FirstHiddenAt: 10, HiddenSince: 20, Pending: &PendingChange{Visibility: Visible, At: 3620},
			Flags:   []FlagView{{EventID: "f", Flagger: "y", Sign: -2, Weight: 0.000001}, {Cosigners: []string{"p", "q"}}},
			Appeals: []Appeal{{EventID: "g", Counted: true}}, History: []Transition{{At: 10, Visibility: Hidden, FlagWeight: 1e-7}}},
	} {
		got := written(func(c *canon) { c.eventModeration(em) })
		if want := oracleJCS(t, em); !bytes.Equal(got, want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}
