package reference

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/state/statetest"
)

// equivCorpus is a random stream meant to reach every branch of the fold:
// profile revisions (every discoverability, odd JSON, topics, interests,
// capabilities, t tags), capabilities (tags or JSON), posts, replies and
// claims (ASCII, mixed case, non-ASCII letters and case foldings, JSON
// content, stop words, long and short tokens, texts past the 256-feature
// cap, repeated, empty and mixed-case t tags, e tags with every kind of
// marker, derived_from as a string or a list), several agents with more
// than ProfilePosts posts, many ties on created_at, follows and
// withdrawals, beacons, task requests, relay announcements and ignored
// kinds (DMs, votes, health).
func equivCorpus(seed uint64, agents, n int, base int64) ([]*protocol.Event, []string) {
	rng := rand.New(rand.NewPCG(seed, 0xd15c))
	hex := func() string {
		if rng.IntN(4) == 0 { // ids sharing a long prefix: orders that read past one
			return fmt.Sprintf("00000000deadbeef%016x%016x%016x", rng.Uint64N(4), rng.Uint64(), rng.Uint64())
		}
		return fmt.Sprintf("%016x%016x%016x%016x", rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64())
	}
	// Three more agents publish only profiles and capabilities: the
	// neighbour query places them by their profile.
	ids := make([]string, agents+3)
	for i := range ids {
		ids[i] = hex()
	}
	// A few agents publish most of the posts, so their windows overflow.
	pick := func() string {
		if rng.IntN(3) == 0 {
			return ids[rng.IntN(min(3, agents))]
		}
		return ids[rng.IntN(agents)]
	}
	at := func() int64 {
		if rng.IntN(4) == 0 {
			return base + int64(rng.IntN(5)) // ties
		}
		return base + rng.Int64N(10*86400)
	}
	words := []string{"coastal", "Rain", "PRICE", "yen", "bitcoin", "tide", "storm", "contract", "japanese", "forecast",
		"the", "and", "a", "x", "42", "2026", "Été", "straße", "İstanbul", "K", "ſun", "日本語", "naïve", "ÀÉÎ", "ﬁne", "σοφία",
		"🙂", "co-op", "e.g.", "it's", strings.Repeat("long", 11), strings.Repeat("z", 40), "Ǆemal", "ǅ", "\u0130i"}
	text := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString([]string{" ", " ", ", ", "\n", "—", "/", "  "}[rng.IntN(7)])
			}
			b.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(8) == 0 {
				fmt.Fprint(&b, rng.IntN(1000))
			}
		}
		return b.String()
	}
	topics := []string{"climate", "market", "weather", "translate", "Climate", "", "日本", "t5"}
	tTags := func() [][]string {
		var out [][]string
		for range rng.IntN(4) {
			out = append(out, []string{"t", topics[rng.IntN(len(topics))]})
		}
		return out
	}
	js := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	var out, posts []*protocol.Event
	ev := func(agent string, kind int64, content string, tags [][]string) *protocol.Event {
		e := &protocol.Event{ID: hex(), AgentID: agent, CreatedAt: at(), Kind: kind, Content: content, Tags: tags}
		out = append(out, e)
		return e
	}
	discs := []any{"public", "topic_only", "invite_only", "weird", 7, nil}
	for range n {
		a := pick()
		r := rng.IntN(100)
		if r < 12 && rng.IntN(4) == 0 {
			a = ids[agents+rng.IntN(3)]
		}
		switch {
		case r < 8: // profile
			body := map[string]any{"name": "n", "about": text(4)}
			if d := discs[rng.IntN(len(discs))]; d != nil {
				body[[]string{"discoverability", "Discoverability", "DISCOVERABILITY"}[rng.IntN(3)]] = d
			}
			if rng.IntN(2) == 0 {
				body["topics"] = []any{topics[rng.IntN(len(topics))], 3, ""}
				body["interests"] = []string{topics[rng.IntN(len(topics))]}
			}
			if rng.IntN(3) == 0 {
				body["capabilities"] = []map[string]any{{"name": "translate"}, {"name": ""}}
			}
			content := js(body)
			switch rng.IntN(12) {
			case 0:
				content = "not json " + text(3)
			case 1:
				content = `{"discoverabilit\u0079":"invite_only"}`
			case 2:
				content = `{"diſcoverability":"topic_only"}`
			}
			ev(a, protocol.KindProfile, content, tTags())
		case r < 12: // capability
			if rng.IntN(2) == 0 {
				ev(a, protocol.KindCapability, "{}", [][]string{{"cap", topics[rng.IntN(4)]}, {"cap", "code"}})
			} else {
				ev(a, protocol.KindCapability, js(map[string]any{"capabilities": []map[string]any{{"name": topics[rng.IntN(4)]}}}), nil)
			}
		case r < 70: // post, reply, claim
			tags := tTags()
			kind := int64(protocol.KindPost)
			content := text(1 + rng.IntN(14))
			switch rng.IntN(10) {
			case 0:
				content = text(400) // past the feature cap
			case 1:
				content = js(map[string]any{"claim": text(5), "title": text(2), "other": text(3)})
			case 2:
				content = js(map[string]any{"text": 5, "summary": text(3)})
			case 3:
				content = ""
			}
			if len(posts) > 0 && rng.IntN(3) == 0 {
				p := posts[rng.IntN(len(posts))]
				kind = protocol.KindReply
				switch rng.IntN(5) {
				case 0:
					tags = append(tags, []string{"e", p.ID, "root"})
				case 1:
					tags = append(tags, []string{"e", p.ID, "wss://x", "reply"}, []string{"e", posts[rng.IntN(len(posts))].ID})
				case 2:
					tags = append(tags, []string{"e", p.ID, "Mention"}, []string{"e", "nothex"})
				case 3:
					tags = append(tags, []string{"e", p.ID, "reply"}, []string{"e", p.ID, "mention"})
				}
			} else if len(posts) > 0 && rng.IntN(4) == 0 {
				kind = protocol.KindKnowledge
				var df any = posts[rng.IntN(len(posts))].ID
				if rng.IntN(2) == 0 {
					df = []string{posts[rng.IntN(len(posts))].ID, "bad"}
				}
				content = js(map[string]any{"claim": text(6), "derived_from": df})
				tags = append(tags, []string{"e", posts[rng.IntN(len(posts))].ID, "derived"})
			}
			posts = append(posts, ev(a, kind, content, tags))
		case r < 80: // follow
			body := map[string]any{"reason": "good"}
			if rng.IntN(3) == 0 {
				body = map[string]any{"withdraw": true}
			}
			tags := [][]string{{"p", ids[rng.IntN(agents)]}}
			if rng.IntN(2) == 0 {
				tags = append(tags, []string{"t", topics[rng.IntN(4)]}, []string{"p", a})
			}
			ev(a, protocol.KindSubscribe, js(body), tags)
		case r < 86: // beacon
			tags := tTags()
			if rng.IntN(2) == 0 {
				tags = append(tags, []string{"cap_wanted", topics[rng.IntN(4)]})
			}
			ev(a, protocol.KindBeacon, js(map[string]any{"intent": "seek", "about": text(3), "ttl_sec": 60 + rng.IntN(86400),
				"urgency": []string{"low", "normal", "high"}[rng.IntN(3)]}), tags)
		case r < 90: // task request
			ev(a, protocol.KindTaskRequest, js(map[string]any{"description": text(4)}), tTags())
		case r < 92:
			ev(a, protocol.KindRelayAnnounce, js(map[string]any{"url": "https://r"}), nil)
		default: // kinds no view folds
			k := []int64{protocol.KindDM, protocol.KindTrustVote, protocol.KindHealth, protocol.KindFunding}[rng.IntN(4)]
			ev(a, k, text(3), append(tTags(), []string{"p", ids[rng.IntN(agents)]}))
		}
	}
	return out, ids
}

// pair is the new fold and the reference fed the same calls.
type pair struct {
	f *discovery.Fold
	r *Fold
}

func (p pair) add(e *protocol.Event)    { p.f.Add(e); p.r.Add(e) }
func (p pair) remove(e *protocol.Event) { p.f.Remove(e); p.r.Remove(e) }

// compare fails unless every answer of the two folds at now is the same
// (as JSON: the routes serve them so).
func (p pair) compare(t *testing.T, what string, ids []string, evs []*protocol.Event, now int64) {
	t.Helper()
	j := func(v ...any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	check := func(name string, got, want string) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: %s differs:\n got %s\nwant %s", what, name, got, want)
		}
	}
	f, r := p.f, p.r
	check("digest", fmt.Sprintf("%x", f.Digest(now)), fmt.Sprintf("%x", r.Digest(now)))
	check("reader rule", fmt.Sprint(f.ReaderRule() == nil), fmt.Sprint(r.ReaderRule() == nil))
	agents := append([]string{strings.Repeat("0", 64)}, ids...)
	topics := []string{"climate", "market", "weather", "translate", "Climate", "日本", "t5", "none"}
	for i, a := range agents {
		check("discoverability "+a, f.Discoverability(a), r.Discoverability(a))
		check("following "+a, j(f.Following(a, true), f.Following(a, false)), j(r.Following(a, true), r.Following(a, false)))
		check("followers "+a, j(f.Followers(discovery.TargetAgent, a, true), f.Followers(discovery.TargetAgent, a, false)),
			j(r.Followers(TargetAgent, a, true), r.Followers(TargetAgent, a, false)))
		for _, w := range []int64{3600, 7 * 86400, 90 * 86400} {
			check(fmt.Sprint("copresence ", w, a), j(f.Copresence(a, now, w, 50), f.CopresenceScores(a, now, w, 3)),
				j(r.Copresence(a, now, w, 50), r.CopresenceScores(a, now, w, 3)))
		}
		for _, k := range []int{1, 5, 20} {
			check(fmt.Sprint("neighbors ", k, a), j(f.Neighbors(a, k)), j(r.Neighbors(a, k)))
		}
		check("sample topics "+a, j(f.SampleTopics(a)), j(r.SampleTopics(a)))
		fa, fb, fc := f.Interests(a)
		ra, rb, rc := r.Interests(a)
		check("interests "+a, j(fa, fb, fc), j(ra, rb, rc))
		other := agents[(i+1)%len(agents)]
		check("may see "+a, j(f.MaySee(a, a), f.MaySee(a, other), f.MaySee(other, a), f.MaySee("", a), f.Follows(a, other)),
			j(r.MaySee(a, a), r.MaySee(a, other), r.MaySee(other, a), r.MaySee("", a), r.Follows(a, other)))
		ta, tb := topics[i%len(topics)], topics[(i+3)%len(topics)]
		check("recent "+a, j(f.Recent([]string{a, other}, []string{ta, tb}, now-7*86400, now, 40), f.Recent([]string{a}, nil, now-90*86400, now, 300)),
			j(r.Recent([]string{a, other}, []string{ta, tb}, now-7*86400, now, 40), r.Recent([]string{a}, nil, now-90*86400, now, 300)))
		fq, fn := f.Active(discovery.BeaconQuery{Author: a}, now)
		rq, rn := r.Active(BeaconQuery{Author: a}, now)
		check("beacons "+a, j(fq, fn), j(rq, rn))
	}
	for _, tp := range topics {
		check("topic followers "+tp, j(f.Followers(discovery.TargetTopic, tp, true)), j(r.Followers(TargetTopic, tp, true)))
		fq, fn := f.Active(discovery.BeaconQuery{Topic: tp, Limit: 5}, now)
		rq, rn := r.Active(BeaconQuery{Topic: tp, Limit: 5}, now)
		check("beacons on "+tp, j(fq, fn), j(rq, rn))
		fq, fn = f.Active(discovery.BeaconQuery{CapWanted: tp}, now)
		rq, rn = r.Active(BeaconQuery{CapWanted: tp}, now)
		check("beacons wanting "+tp, j(fq, fn), j(rq, rn))
	}
	for i, e := range evs {
		fc, fn := f.CitedBy(e.ID)
		rc, rn := r.CitedBy(e.ID)
		check("citations of "+e.ID, j(fc, fn, f.Cites(e.ID), f.Reach(e.ID, e.AgentID), f.FirstProfile(e)),
			j(rc, rn, r.Cites(e.ID), r.Reach(e.ID, e.AgentID), r.FirstProfile(e)))
		follower := agents[i%len(agents)]
		check("follows event "+e.ID, fmt.Sprint(f.FollowsEvent(follower, e)), fmt.Sprint(r.FollowsEvent(follower, e)))
	}
}

// TestFoldEqualsReference: on random streams folded in random order, with
// removals (revocations) interleaved, the fold answers every query and
// digests exactly as the fold before the publish path's work on its cost
// (internal/reference), at checkpoints along the stream and at several
// evaluation times.
func TestFoldEqualsReference(t *testing.T) {
	const base = 1763800000
	for seed := range uint64(6) {
		evs, ids := equivCorpus(seed, 4+int(seed)*4, 1500, base)
		rng := rand.New(rand.NewPCG(seed, 3))
		rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
		p := pair{discovery.New(), New()}
		var added []*protocol.Event
		now := int64(base)
		for i, e := range evs {
			p.add(e)
			added = append(added, e)
			if rng.IntN(12) == 0 { // a revocation of something folded
				k := rng.IntN(len(added))
				p.remove(added[k])
				added = append(added[:k], added[k+1:]...)
			}
			if rng.IntN(200) == 0 { // a revocation of something never folded
				p.remove(&protocol.Event{ID: strings.Repeat("e", 64), AgentID: ids[0], Kind: protocol.KindPost, CreatedAt: base, Content: "gone"})
			}
			if (i+1)%500 == 0 {
				now += 86400 * int64(1+rng.IntN(3))
				p.compare(t, fmt.Sprintf("seed %d after %d events", seed, i+1), ids, evs, now)
			}
		}
		// Far later: the feed's index prunes, then takes new events.
		now += 100 * 86400
		p.compare(t, fmt.Sprintf("seed %d, 100 days later", seed), ids, evs, now)
		more, _ := equivCorpus(seed+100, len(ids), 300, now-50*86400)
		for _, e := range more {
			e.AgentID = ids[rng.IntN(len(ids))]
			p.add(e)
		}
		p.compare(t, fmt.Sprintf("seed %d, after the prune", seed), ids, append(evs, more...), now)
	}
}

// TestFoldEqualsReferenceStateCorpus: the state package's random corpora
// (votes, flags, appeals, overrides, task lifecycles, revocations) folded
// through both.
func TestFoldEqualsReferenceStateCorpus(t *testing.T) {
	const base = 1763800000
	for seed := range uint64(3) {
		evs := statetest.Corpus(seed, 12, 20, base, 5*86400)
		p := pair{discovery.New(), New()}
		var ids []string
		seen := map[string]bool{}
		for _, e := range evs {
			p.add(e)
			if !seen[e.AgentID] {
				seen[e.AgentID] = true
				ids = append(ids, e.AgentID)
			}
		}
		p.compare(t, fmt.Sprintf("seed %d", seed), ids, evs, base+5*86400)
	}
}

// TestFoldEqualsReferenceCommonWords: a word most of 700 agents use makes
// a bucket past staleBucket, whose weights the fold stops following; its
// members post it again while it is stale, then most agents' posts are
// revoked, so the bucket is read again (fewer agents than the query's
// rare-bucket limit) and must hold the weights of the counts reached
// meanwhile. The neighbour answers equal the reference's at each stage.
func TestFoldEqualsReferenceCommonWords(t *testing.T) {
	const base, agents, kept = 1763800000, 700, 60
	p := pair{discovery.New(), New()}
	ids := make([]string, agents)
	var first []*protocol.Event
	post := func(i, j int, text string) *protocol.Event {
		e := &protocol.Event{ID: fmt.Sprintf("%032x%032x", i+1, j+1), AgentID: ids[i], Kind: protocol.KindPost,
			CreatedAt: base + int64(j), Content: text, Tags: [][]string{{"t", fmt.Sprint("topic", i%9)}}}
		p.add(e)
		return e
	}
	for i := range ids {
		ids[i] = fmt.Sprintf("%064x", 7*i+3)
	}
	for i := range ids {
		first = append(first, post(i, 0, fmt.Sprintf("common words for agent%d", i)))
	}
	check := func(stage string) {
		t.Helper()
		for _, a := range ids[:kept+20] {
			for _, k := range []int{1, 5, 20} {
				got, _ := json.Marshal(p.f.Neighbors(a, k))
				want, _ := json.Marshal(p.r.Neighbors(a, k))
				if string(got) != string(want) {
					t.Fatalf("%s: neighbors %d of %s:\n got %s\nwant %s", stage, k, a, got, want)
				}
			}
		}
	}
	check("one post each")
	for j := 1; j <= 3; j++ { // the common words counted again while the bucket is stale
		for i := range kept {
			post(i, j, strings.Repeat("common words ", i%4+j)+fmt.Sprint("extra", i%7))
		}
	}
	check("the first agents posted again")
	for _, e := range first[kept:] {
		p.remove(e)
	}
	check("most posts revoked")
}
