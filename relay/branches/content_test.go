package branches

import (
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

func TestParseCheckpoint(t *testing.T) {
	h := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		content string
		ok      bool
	}{
		{`{"checkpoint_id":"cp","state_hash":"` + h + `","event_count":1,"as_of":100}`, true},
		{`{"checkpoint_id":"cp","state_hash":"` + h + `","event_count":1,"as_of":101}`, false}, // after created_at
		{`{"checkpoint_id":"","state_hash":"` + h + `","event_count":1,"as_of":100}`, false},
		{`{"checkpoint_id":"cp","state_hash":"` + strings.ToUpper(h) + `","event_count":1,"as_of":100}`, false},
		{`{"checkpoint_id":"cp","state_hash":"` + h + `","event_count":-1,"as_of":100}`, false},
		{`{"checkpoint_id":"cp","state_hash":"` + h + `","event_count":1.5,"as_of":100}`, false},
		{`{"checkpoint_id":"` + strings.Repeat("x", 129) + `","state_hash":"` + h + `","event_count":1,"as_of":100}`, false},
		{`[]`, false},
	} {
		_, err := ParseCheckpoint(&protocol.Event{CreatedAt: 100, Content: tc.content})
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v", tc.content, err)
		}
		if err != nil && !strings.HasPrefix(reasonOf(err), "invalid_checkpoint: ") {
			t.Errorf("reason %q", reasonOf(err))
		}
	}
}

func TestParseBanTagForm(t *testing.T) {
	id := strings.Repeat("cd", 32)
	b, err := ParseBan(&protocol.Event{Content: `{"reason":"spam"}`, Tags: [][]string{{"p", id}}})
	if err != nil || b.AgentID != id {
		t.Fatalf("%+v %v", b, err)
	}
	if _, err := ParseBan(&protocol.Event{Content: `{}`, Tags: [][]string{{"p", id}, {"p", id}}}); err == nil {
		t.Fatal("two p tags name no single agent")
	}
}

func TestUniquePrefix(t *testing.T) {
	a := "0123456789abcdef" + strings.Repeat("0", 48)
	b := "01234567ffffffff" + strings.Repeat("0", 48)
	c := "0123456789abffff" + strings.Repeat("0", 48)
	if got := uniquePrefix(a, []string{a}); got != "01234567" {
		t.Fatal(got)
	}
	if got := uniquePrefix(a, []string{a, b}); got != "0123456789ab" {
		t.Fatal(got)
	}
	if got := uniquePrefix(a, []string{a, b, c}); got != "0123456789abcdef" {
		t.Fatal(got)
	}
}

func TestTopTime(t *testing.T) {
	for in, want := range map[int64]int64{0: 0, 3599: 0, 3600: 3600, 7261: 7200, -1: -3600} {
		if got := topTime(in); got != want {
			t.Errorf("topTime(%d) = %d, want %d", in, got, want)
		}
	}
}
