package protocol

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"
)

func TestDMBucket(t *testing.T) {
	cases := map[int]int{0: 32, 31: 32, 32: 64, 63: 64, 64: 128, 32767: 32768, 32768: 65536,
		65535: 65536, 65536: 131072, 131071: 131072, 131072: 196608}
	for n, want := range cases {
		if got := DMBucket(n); got != want || !IsDMBucket(got) {
			t.Errorf("DMBucket(%d) = %d, want %d", n, got, want)
		}
	}
	for _, n := range []int{-16, 0, 16, 31, 33, 48, 96, 65537, 98304, 131073} {
		if IsDMBucket(n) {
			t.Errorf("IsDMBucket(%d) = true", n)
		}
	}
}

func TestDMRule(t *testing.T) {
	author, to := strings.Repeat("aa", 32), strings.Repeat("bb", 32)
	nonce := strings.Repeat("0f", 24)
	box := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	ok := box(16 + 32)
	tags := func(extra ...[]string) [][]string {
		return append([][]string{{"p", to}, {"nonce", nonce}}, extra...)
	}
	cases := []struct {
		name    string
		content string
		tags    [][]string
		want    []string
	}{
		{"smallest bucket", ok, tags(), nil},
		{"largest bucket that fits", box(16 + 32768), tags(), nil},
		{"multiple of 65536", box(16 + 131072), tags(), nil},
		{"other tags allowed", ok, tags([]string{"e", author}), nil},
		{"no p", ok, [][]string{{"nonce", nonce}}, []string{CodeDMRecipient}},
		{"two p", ok, tags([]string{"p", author}), []string{CodeDMRecipient}},
		{"p without value", ok, tags([]string{"p"}), []string{CodeDMRecipient}},
		{"p is author", ok, [][]string{{"p", author}, {"nonce", nonce}}, []string{CodeDMRecipient}},
		{"p upper hex", ok, [][]string{{"p", strings.ToUpper(to)}, {"nonce", nonce}}, []string{CodeDMRecipient}},
		{"no nonce", ok, [][]string{{"p", to}}, []string{CodeDMNonce}},
		{"two nonces", ok, tags([]string{"nonce", nonce}), []string{CodeDMNonce}},
		{"nonce zz", ok, [][]string{{"p", to}, {"nonce", "zz"}}, []string{CodeDMNonce}},
		{"nonce 47 chars", ok, [][]string{{"p", to}, {"nonce", nonce[:47]}}, []string{CodeDMNonce}},
		{"nonce 50 chars", ok, [][]string{{"p", to}, {"nonce", nonce + "00"}}, []string{CodeDMNonce}},
		{"nonce upper", ok, [][]string{{"p", to}, {"nonce", strings.ToUpper(nonce)}}, []string{CodeDMNonce}},
		{"empty content", "", tags(), []string{CodeDMContent}},
		{"plaintext content", "secret", tags(), []string{CodeDMContent}},
		{"bad base64", strings.Repeat("!", 64), tags(), []string{CodeDMContent}},
		{"url base64", strings.Repeat("-", 64), tags(), []string{CodeDMContent}},
		{"unpadded", strings.TrimRight(box(16+64+1), "="), tags(), []string{CodeDMContent}},
		{"line break", ok[:4] + "\n" + ok[4:], tags(), []string{CodeDMContent}},
		{"no tag room", box(32), tags(), []string{CodeDMContent}},
		{"not a bucket", box(16 + 48), tags(), []string{CodeDMContent}},
		{"one byte short", box(16 + 31), tags(), []string{CodeDMContent}},
		{"non-canonical padding bits", box(16 + 64)[:106] + "B=", tags(), []string{CodeDMContent}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &Event{Kind: KindDM, AgentID: author, Content: c.content, Tags: c.tags}
			if got := codesOf(CheckKind(e)); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("codes %v, want %v", got, c.want)
			}
		})
	}
}

// FuzzParseDM: the kind 3 parser never panics, and what it accepts is
// canonical base64 of 16 + a bucket bytes with a 24-byte nonce.
func FuzzParseDM(f *testing.F) {
	nonce := strings.Repeat("0f", 24)
	f.Add(base64.StdEncoding.EncodeToString(make([]byte, 48)), nonce)
	f.Add("secret", "zz")
	f.Add("AAAA\nAAA=", nonce[:47])
	f.Add(strings.Repeat("A", 64), strings.ToUpper(nonce))
	f.Fuzz(func(t *testing.T, content, nonce string) {
		e := &Event{Kind: KindDM, AgentID: strings.Repeat("aa", 32), Content: content,
			Tags: [][]string{{"p", strings.Repeat("bb", 32)}, {"nonce", nonce}}}
		dm, err := ParseDM(e)
		if err != nil {
			return
		}
		if !IsDMBucket(len(dm.Box)-DMTagSize) || base64.StdEncoding.EncodeToString(dm.Box) != content {
			t.Fatalf("accepted %q as %d bytes", content, len(dm.Box))
		}
	})
}
