package branches

import (
	"errors"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// FuzzParse feeds hostile content to the kind 12, 13 and 14 parsers: they
// never panic, and what they accept keeps their rules.
func FuzzParse(f *testing.F) {
	f.Add(`{"checkpoint_id":"cp-1","state_hash":"` + hex64 + `","event_count":3,"as_of":100}`)
	f.Add(`{"target_checkpoint":"cp-1","reason":"attack","affected_event_ids_sample":["x"]}`)
	f.Add(`{"agent_id":"` + hex64 + `","reason":"spam"}`)
	f.Add(`{"checkpoint_id":"","as_of":1e3,"event_count":-1}`)
	f.Add(`[]`)
	f.Add(`{"as_of":9007199254740993}`)
	f.Fuzz(func(t *testing.T, content string) {
		e := &protocol.Event{CreatedAt: 1000, Content: content, Tags: [][]string{{"p", hex64}, {"branch", "b-0123456789"}}}
		if c, err := ParseCheckpoint(e); err == nil {
			if c.CheckpointID == "" || len(c.CheckpointID) > MaxCheckpointID || !protocol.IsHex64(c.StateHash) || c.AsOf > e.CreatedAt || c.AsOf < 0 || c.EventCount < 0 {
				t.Fatalf("accepted %+v", c)
			}
		}
		if p, err := ParseProposal(e); err == nil && (p.TargetCheckpoint == "" || len(p.TargetCheckpoint) > MaxCheckpointID) {
			t.Fatalf("accepted %+v", p)
		}
		if b, err := ParseBan(e); err == nil && !protocol.IsHex64(b.AgentID) {
			t.Fatalf("accepted %+v", b)
		}
		for _, b := range branchTags(e) {
			if !ValidBranchID(b) {
				t.Fatalf("tag %q", b)
			}
		}
	})
}

const hex64 = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// FuzzSelect feeds hostile ?branch= lists to Select: it never panics,
// refuses malformed ids with a coded error, and names as unknown only
// well-formed ids.
func FuzzSelect(f *testing.F) {
	for _, s := range []string{"main", "all", "main,b-deadbeef", "pre-rollback-0123456789abcdef", "b-", "", ",", "MAIN", "b-deadbeef0123456789"} {
		f.Add(s)
	}
	m := NewModule(Options{})
	f.Fuzz(func(t *testing.T, list string) {
		_, unknown, err := m.Select(strings.Split(list, ","), 1000)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code == "" {
				t.Fatalf("uncoded error %v", err)
			}
			return
		}
		for _, u := range unknown {
			if !ValidBranchID(u) {
				t.Fatalf("unknown %q is not a branch id", u)
			}
		}
	})
}
