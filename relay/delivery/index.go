package delivery

import (
	"slices"
	"strconv"
	"strings"

	"github.com/anp2net/relay/protocol"
)

// index finds the active triggers an event may match without trying them all:
// each trigger is filed under the keys of one of its match conditions (a
// tag name's values when it has tag conditions, else its authors, else its
// kinds), every one of which a matching event must hit. An event's
// candidates are the triggers filed under its tags, its author and its
// kind; MatchEvent then decides. It is immutable: a change of the trigger
// set builds a new one.
type index struct {
	all   int
	byKey map[string][]*storedTrigger
}

func tagKey(name, value string) string { return "t\x00" + name + "\x00" + value }
func authorKey(a string) string        { return "a\x00" + a }
func kindKey(k int64) string           { return "k\x00" + strconv.FormatInt(k, 10) }

// newIndex files trigs.
func newIndex(trigs map[string]*storedTrigger) *index {
	ix := &index{all: len(trigs), byKey: map[string][]*storedTrigger{}}
	for _, t := range trigs {
		if t.PausedAt != 0 {
			continue // a paused trigger matches nothing
		}
		m := &t.Spec.Match
		var keys []string
		switch {
		case m.Type != "":
			if k, ok := strings.CutPrefix(m.Type, "anp2.kind."); ok {
				n, _ := strconv.ParseInt(k, 10, 64)
				keys = append(keys, kindKey(n))
			} else {
				keys = append(keys, tagKey("t", m.Type), tagKey("s", m.Type))
			}
		case len(m.Tags) > 0:
			names := make([]string, 0, len(m.Tags))
			for n := range m.Tags {
				names = append(names, n)
			}
			slices.Sort(names) // any one name would do; the first is stable
			for _, v := range m.Tags[names[0]] {
				keys = append(keys, tagKey(names[0], v))
			}
		case len(m.Authors) > 0:
			for _, a := range m.Authors {
				keys = append(keys, authorKey(a))
			}
		default:
			for _, k := range m.Kinds {
				keys = append(keys, kindKey(k))
			}
		}
		slices.Sort(keys)
		for _, k := range slices.Compact(keys) {
			ix.byKey[k] = append(ix.byKey[k], t)
		}
	}
	return ix
}

// candidates returns the triggers e may match, each once, in a stable
// order (by id).
func (ix *index) candidates(e *protocol.Event) []*storedTrigger {
	var out []*storedTrigger
	add := func(k string) { out = append(out, ix.byKey[k]...) }
	add(kindKey(e.Kind))
	add(authorKey(e.AgentID))
	for _, t := range e.Tags {
		if len(t) >= 2 {
			add(tagKey(t[0], t[1]))
		}
	}
	slices.SortFunc(out, func(a, b *storedTrigger) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return slices.Compact(out)
}
