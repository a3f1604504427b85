package branches

import (
	"cmp"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/anp2net/relay/protocol"
)

// A voluntary fork b-<hex> is rooted at the earliest event, by
// (created_at, id), whose id starts with <hex> (SPEC §17.3). The fold
// keeps every event's id, time and kind (48 bytes an event) to find a
// root that came before its fork, and remembers each fork's root until an
// event with its prefix is added or removed.

// idEntry is one folded event as the root search reads it.
type idEntry struct {
	id   [32]byte
	at   int64
	kind int64
}

// rootRef is a fork's root as resolved: ok false when no event has the
// prefix. tags are the root's branch tags.
type rootRef struct {
	ok   bool
	id   string
	at   int64
	kind int64
	tags []string
}

// index records or withdraws e for the root search, and drops the roots
// its id may change. Callers hold mu.
func (f *Fold) indexID(e *protocol.Event, add bool) {
	var ent idEntry
	if _, err := hex.Decode(ent.id[:], []byte(e.ID)); err != nil {
		return
	}
	ent.at, ent.kind = e.CreatedAt, e.Kind
	if add {
		f.ids = append(f.ids, ent)
	} else if i := slices.IndexFunc(f.ids, func(x idEntry) bool { return x.id == ent.id }); i >= 0 {
		f.ids[i] = f.ids[len(f.ids)-1]
		f.ids = f.ids[:len(f.ids)-1]
	}
	if len(f.roots) == 0 {
		return
	}
	for _, n := range []int{8, 9, 10, 11, 12, 13, 14, 15, 16} {
		if _, ok := f.roots["b-"+e.ID[:n]]; ok {
			delete(f.roots, "b-"+e.ID[:n])
			f.gen++
		}
	}
}

// root returns fork's root, resolving and remembering it. Callers hold mu.
func (f *Fold) root(fork string) rootRef {
	if r, ok := f.roots[fork]; ok {
		return r
	}
	prefix := strings.TrimPrefix(fork, "b-")
	full, _ := hex.DecodeString(prefix[:len(prefix)/2*2])
	var best *idEntry
	for i := range f.ids {
		e := &f.ids[i]
		if !hasHexPrefix(e.id, full, prefix) {
			continue
		}
		if best == nil || cmp.Or(cmp.Compare(e.at, best.at), slices.Compare(e.id[:], best.id[:])) < 0 {
			best = e
		}
	}
	r := rootRef{}
	if best != nil {
		r = rootRef{ok: true, id: hex.EncodeToString(best.id[:]), at: best.at, kind: best.kind}
		for b, ids := range f.tagged {
			if _, ok := ids[r.id]; ok {
				r.tags = append(r.tags, b)
			}
		}
		slices.Sort(r.tags)
	}
	f.roots[fork] = r
	return r
}

// hasHexPrefix reports whether id starts with the hex prefix (full is its
// whole bytes; an odd length adds a high nibble).
func hasHexPrefix(id [32]byte, full []byte, prefix string) bool {
	if string(id[:len(full)]) != string(full) {
		return false
	}
	if len(prefix)%2 == 1 {
		nib := prefix[len(prefix)-1]
		var v byte
		if nib >= 'a' {
			v = nib - 'a' + 10
		} else {
			v = nib - '0'
		}
		return id[len(full)]>>4 == v
	}
	return true
}

// forkRoot is a fork's root in a view: its id and time, and its line —
// the main and pre-rollback branches it is in, whose earlier events the
// fork inherits.
type forkRoot struct {
	fork string
	id   string
	at   int64
	line []string
}

// before reports whether e comes before r by (created_at, id).
func (r *forkRoot) before(e *protocol.Event) bool {
	return e.CreatedAt < r.at || e.CreatedAt == r.at && e.ID < r.id
}
