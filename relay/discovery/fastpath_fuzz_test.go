package discovery

import (
	"encoding/json"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// oldFeatures is features as it was written before the publish path's work
// on its cost: the schema's definition, token strings, a map and an FNV
// hash per feature.
func oldFeatures(e *protocol.Event) []feature {
	counts := map[uint32]float32{}
	add := func(s string) {
		if len(counts) >= MaxPostFeatures {
			return
		}
		h := fnv.New32a()
		h.Write([]byte(s))
		counts[h.Sum32()%EmbeddingDims]++
	}
	text := e.Content
	var obj map[string]any
	if json.Unmarshal([]byte(e.Content), &obj) == nil {
		var parts []string
		for _, k := range []string{"claim", "text", "content", "about", "title", "summary"} {
			if s, ok := obj[k].(string); ok {
				parts = append(parts, s)
			}
		}
		text = strings.Join(parts, " ")
	}
	toks := Tokens(text)
	for i, t := range toks {
		add("w|" + t)
		if i+1 < len(toks) {
			add("b|" + t + " " + toks[i+1])
		}
	}
	for _, t := range topicsOf(e) {
		add("t|" + strings.ToLower(t))
	}
	out := make([]feature, 0, len(counts))
	for d, c := range counts {
		out = append(out, feature{d, c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dim < out[j].dim })
	return out
}

var fastPathSeeds = []string{
	"", "bench full event 12 at 1763800000", "Coastal RAIN, price-of yen: 42!", "the and a x 2026",
	`{"claim":"Tide tables","title":"storm","other":"x"}`, ` null `, "null", `{"text":5}`, `[1,2]`, `"str"`, "42",
	"Été straße İstanbul K ſun 日本語", "\u212a\u0130\u0131", strings.Repeat("word ", 300), strings.Repeat("w", 41) + " ok",
	`{"discoverability":"invite_only"}`, `{"DiscoverAbility":"topic_only"}`, `{"discoverabilit\u0079":"invite_only"}`,
	`{"diſcoverability":"topic_only"}`, `{"discoverability":"public","discoverability":"invite_only"}`, "discoverability",
	"\t\n{\"about\":\"x\"}", "{bad json", "nul",
}

// FuzzFeatures: the in-place hashing (an ASCII tokenizer, FNV-1a by hand,
// a capped feature set) gives exactly the schema's features for any text
// and topics.
func FuzzFeatures(f *testing.F) {
	for i, s := range fastPathSeeds {
		f.Add(s, fastPathSeeds[(i+3)%len(fastPathSeeds)])
	}
	var s featureSet
	f.Fuzz(func(t *testing.T, content, topic string) {
		e := &protocol.Event{Kind: protocol.KindPost, Content: content,
			Tags: [][]string{{"t", topic}, {"t", strings.ToUpper(topic)}, {"t", "x"}, {"t", topic}}}
		got, want := features(e, topicsOf(e), &s), oldFeatures(e)
		if !slices.Equal(got, want) {
			t.Fatalf("features of %q (topic %q):\n got %v\nwant %v", content, topic, got, want)
		}
	})
}

// FuzzDiscoverabilityPrefilter: content that mayNameDiscoverability turns
// away reads as public through encoding/json too; and jsonObjectOrNull
// turns away only content that does not unmarshal into a map.
func FuzzDiscoverabilityPrefilter(f *testing.F) {
	for _, s := range fastPathSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		var body struct {
			Discoverability any `json:"discoverability"`
		}
		json.Unmarshal([]byte(content), &body)
		if body.Discoverability != nil && !mayNameDiscoverability(content) {
			t.Fatalf("%q sets discoverability to %v, but the prefilter skips it", content, body.Discoverability)
		}
		var obj map[string]any
		if json.Unmarshal([]byte(content), &obj) == nil && !jsonObjectOrNull(content) {
			t.Fatalf("%q unmarshals into a map, but postText reads it as text", content)
		}
	})
}
