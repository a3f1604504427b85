package protocol

import (
	"reflect"
	"strings"
	"testing"
)

func TestBeaconRule(t *testing.T) {
	topic := [][]string{{"t", "climate"}}
	cases := []struct {
		name    string
		content string
		tags    [][]string
		want    []string
	}{
		{"seed example", `{"intent":"seek","about":"latest coastal climate observations 2026","ttl_sec":3600,"urgency":"normal"}`,
			[][]string{{"t", "climate"}, {"cap_wanted", "data.observation.weather"}}, nil},
		{"defaults", `{"intent":"offer","about":"x"}`, topic, nil},
		{"cap_wanted only", `{"intent":"help","about":"x"}`, [][]string{{"cap_wanted", "translate"}}, nil},
		{"no target tag", `{"intent":"seek","about":"x"}`, nil, []string{CodeMissingTag}},
		{"ttl too short", `{"intent":"seek","about":"x","ttl_sec":59}`, topic, []string{CodeInvalidBeacon}},
		{"ttl too long", `{"intent":"seek","about":"x","ttl_sec":604801}`, topic, []string{CodeInvalidBeacon}},
		{"ttl fraction", `{"intent":"seek","about":"x","ttl_sec":60.5}`, topic, []string{CodeInvalidBeacon}},
		{"ttl string", `{"intent":"seek","about":"x","ttl_sec":"60"}`, topic, []string{CodeInvalidBeacon}},
		{"urgency unknown", `{"intent":"seek","about":"x","urgency":"asap"}`, topic, []string{CodeInvalidBeacon}},
		{"urgency null", `{"intent":"seek","about":"x","urgency":null}`, topic, []string{CodeInvalidBeacon}},
		{"intent upper", `{"intent":"Seek","about":"x"}`, topic, []string{CodeInvalidBeacon}},
		{"intent missing", `{"about":"x"}`, topic, []string{CodeInvalidBeacon}},
		{"about empty", `{"intent":"seek","about":""}`, topic, []string{CodeInvalidBeacon}},
		{"about too long", `{"intent":"seek","about":"` + strings.Repeat("a", 1025) + `"}`, topic, []string{CodeInvalidBeacon}},
		{"not json", `seek`, nil, []string{CodeInvalidBeacon, CodeMissingTag}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &Event{Kind: KindBeacon, Content: c.content, Tags: c.tags}
			if got := codesOf(CheckKind(e)); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("codes %v, want %v", got, c.want)
			}
		})
	}
	b, err := ParseBeacon(`{"intent":"seek","about":"x"}`)
	if err != nil || b.TTLSec != BeaconDefaultTTL || b.Urgency != "normal" {
		t.Fatalf("defaults: %+v %v", b, err)
	}
}

func TestSubscribeRule(t *testing.T) {
	target := strings.Repeat("ab", 32)
	cases := []struct {
		name    string
		content string
		tags    [][]string
		want    []string
	}{
		{"seed example", `{"reason":"trusted source for jp market data"}`, [][]string{{"p", target}, {"t", "market.jp"}}, nil},
		{"empty content", ``, [][]string{{"t", "x"}}, nil},
		{"withdraw", `{"withdraw":true}`, [][]string{{"p", target}}, nil},
		{"withdraw not bool", `{"withdraw":"yes"}`, [][]string{{"p", target}}, []string{CodeInvalidSubscription}},
		{"reason number", `{"reason":1}`, [][]string{{"p", target}}, []string{CodeInvalidSubscription}},
		{"not json", `follow`, [][]string{{"p", target}}, []string{CodeInvalidSubscription}},
		{"no tag", `{}`, nil, []string{CodeMissingTag}},
		{"bad p", `{}`, [][]string{{"p", "alice"}}, []string{CodeInvalidTag}},
		{"empty t", `{}`, [][]string{{"t", ""}}, []string{CodeInvalidTag}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &Event{Kind: KindSubscribe, Content: c.content, Tags: c.tags}
			if got := codesOf(CheckKind(e)); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("codes %v, want %v", got, c.want)
			}
		})
	}
}

// FuzzDiscoveryContent: the beacon and subscription parsers never panic,
// and what they accept is within the documented bounds.
func FuzzDiscoveryContent(f *testing.F) {
	for _, s := range []string{`{"intent":"seek","about":"x","ttl_sec":3600,"urgency":"high"}`, `{"reason":"r","withdraw":true}`, ``, `{`, `{"ttl_sec":1e400}`, `{"intent":"a","about":"b","ttl_sec":-1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if b, err := ParseBeacon(s); err == nil {
			if b.TTLSec < BeaconMinTTL || b.TTLSec > BeaconMaxTTL || UrgencyRank(b.Urgency) < 0 || b.About == "" {
				t.Fatalf("accepted out of bounds: %+v", b)
			}
		}
		ParseSubscription(s)
	})
}

func TestCacheInvalidateRule(t *testing.T) {
	id := strings.Repeat("cd", 32)
	cases := []struct {
		name    string
		content string
		tags    [][]string
		want    []string
	}{
		{"seed example", `{"reason":"profile_updated"}`, [][]string{{"e", id}}, nil},
		{"empty content", ``, [][]string{{"e", id}}, nil},
		{"reason number", `{"reason":3}`, [][]string{{"e", id}}, []string{CodeInvalidTag}},
		{"not json", `stale`, [][]string{{"e", id}}, []string{CodeInvalidTag}},
		{"no e tag", `{}`, nil, []string{CodeMissingTag}},
		{"e not hex", `{}`, [][]string{{"e", "x"}}, []string{CodeMissingTag}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &Event{Kind: KindCacheInvalidate, Content: c.content, Tags: c.tags}
			if got := codesOf(CheckKind(e)); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("codes %v, want %v", got, c.want)
			}
		})
	}
}
