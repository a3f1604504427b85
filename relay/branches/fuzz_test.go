package branches

import (
	"errors"
	"slices"
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

// FuzzForkRoots adds events whose branch tags are hostile strings and
// whose ids share prefixes with them: evaluating never panics, every fork
// root has its fork's prefix, and every event is a member of the forks it
// tags.
func FuzzForkRoots(f *testing.F) {
	for _, s := range []string{"b-00112233", "b-0011223", "b-001122334", "b-0011223344556677", "b-zz", "main", "pre-rollback-00112233", "b-"} {
		f.Add(s, int64(5))
	}
	f.Fuzz(func(t *testing.T, tag string, at int64) {
		fold := NewFold()
		ids := []string{hex64, "0011223300000000000000000000000000000000000000000000000000000000", "00112234" + hex64[8:]}
		var evs []*protocol.Event
		for i, id := range ids {
			e := &protocol.Event{ID: id, AgentID: hex64, CreatedAt: at + int64(i), Kind: 1, Tags: [][]string{}}
			if i == 2 {
				e.Tags = [][]string{{"branch", tag}}
			}
			evs = append(evs, e)
			fold.Add(e)
		}
		v := fold.Evaluate(at + 10)
		for _, b := range v.Branches {
			if b.Root != "" && !strings.HasPrefix(b.Root, b.RootPrefix) {
				t.Fatalf("fork %s rooted at %s", b.ID, b.Root)
			}
		}
		for _, e := range evs {
			members := v.Members(e)
			for _, bt := range branchTags(e) {
				if strings.HasPrefix(bt, "b-") && !slices.Contains(members, bt) {
					t.Fatalf("%s tags %s but is in %v", e.ID, bt, members)
				}
			}
		}
	})
}
