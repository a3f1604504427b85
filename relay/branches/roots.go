package branches

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/trust/sortedtab"
)

// A voluntary fork b-<hex> is rooted at the earliest event, by
// (created_at, id), whose id starts with <hex> (SPEC §17.3). The fold
// keeps every event's id, time and whether it is a governance kind (40
// bytes an event, in an id-sorted table, so a prefix is a range) to find
// a root that came before its fork, and remembers each fork's root until
// an event with its prefix is added or removed.

// idTable is every folded event: id → packed time and governance bit.
type idTable = sortedtab.Table[[32]byte, int64]

func cmpID(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) }

func idPrefix(id [32]byte) uint64 { return binary.BigEndian.Uint64(id[:8]) }

func newIDTable() *idTable { return sortedtab.New[[32]byte, int64](cmpID, idPrefix) }

// fromSortedIDs returns a table of ids, which must be strictly increasing,
// and their packed values.
func fromSortedIDs(ids [][32]byte, packed []int64) (*idTable, bool) {
	return sortedtab.FromSorted(cmpID, idPrefix, ids, packed)
}

// packID packs an event's time and whether its kind is a governance kind
// (the only part of the kind the forks' lines read, View.lines) into one
// int64; created_at is below 2^53 (SPEC §3).
func packID(at, kind int64) int64 {
	v := at << 1
	if isGovernance(kind) {
		v |= 1
	}
	return v
}

// unpackID returns the time and a kind standing for the governance bit.
func unpackID(v int64) (at, kind int64) {
	if v&1 == 1 {
		return v >> 1, protocol.KindCheckpoint
	}
	return v >> 1, 0
}

func isGovernance(kind int64) bool {
	return kind == protocol.KindCheckpoint || kind == protocol.KindRollback || kind == protocol.KindBan
}

// rootRef is a fork's root as resolved: ok false when no event has the
// prefix. tags are the root's branch tags; kind is the root's kind as far
// as governance goes (unpackID).
type rootRef struct {
	ok   bool
	id   string
	at   int64
	kind int64
	tags []string
}

// indexID records or withdraws e for the root search, and drops the roots
// its id may change. Callers hold mu.
func (f *Fold) indexID(e *protocol.Event, add bool) {
	var id [32]byte
	if _, err := hex.Decode(id[:], []byte(e.ID)); err != nil || len(e.ID) != 64 {
		return
	}
	if add {
		f.ids.Put(id, packID(e.CreatedAt, e.Kind))
	} else {
		f.ids.Delete(id)
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
	var from [32]byte
	copy(from[:], full)
	found := false
	var best [32]byte
	var bestAt, bestKind int64
	consider := func(id [32]byte, v int64) {
		at, kind := unpackID(v)
		if !found || cmp.Or(cmp.Compare(at, bestAt), slices.Compare(id[:], best[:])) < 0 {
			found, best, bestAt, bestKind = true, id, at, kind
		}
	}
	for id, v := range f.ids.Ascend(from) {
		if string(id[:len(full)]) != string(full) {
			break // past the prefix's range
		}
		if hasHexPrefix(id, full, prefix) {
			consider(id, v)
		}
	}
	for id, v := range f.ids.Recent() {
		if hasHexPrefix(id, full, prefix) {
			consider(id, v)
		}
	}
	r := rootRef{}
	if found {
		r = rootRef{ok: true, id: hex.EncodeToString(best[:]), at: bestAt, kind: bestKind}
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
