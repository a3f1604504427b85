package tlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/mod/sumdb/tlog"
)

// tree is the log's Merkle tree kept on disk: a flat file of every stored
// hash of golang.org/x/mod/sumdb/tlog (RFC 6962 hashes, in the order of
// tlog.StoredHashIndex), 32 bytes each, so the hash at stored index i is
// at offset 32·i. A tree of n leaves is exactly the file's first
// tlog.StoredHashCount(n) hashes (about 2n), so the file only grows and a
// smaller tree is a prefix of it. Nothing is held in memory but the size:
// proofs and tiles read the hashes they need with pread.
type tree struct {
	// mu serialises appends and truncation (one writer); readers take
	// no lock: they read only below the published size n.
	mu sync.Mutex
	f  *os.File
	n  atomic.Int64
	// edge holds, by stored index, the roots of the complete subtrees
	// of the tree (at most one per level): all that hashing the next
	// leaf reads, so an append reads nothing from the file (mu).
	edge map[int64]tlog.Hash
}

// openTree opens (creating if needed) the hash file at path and returns a
// tree of the largest size whose hashes it holds completely (a torn tail
// is cut off).
func openTree(path string) (*tree, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open tree: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open tree: %w", err)
	}
	count := fi.Size() / tlog.HashSize
	// The largest n with StoredHashCount(n) ≤ count (StoredHashCount grows
	// with n and is at least n).
	lo, hi := int64(0), count
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if tlog.StoredHashCount(mid) <= count {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	t := &tree{f: f, edge: map[int64]tlog.Hash{}}
	if err := t.truncate(lo); err != nil {
		f.Close()
		return nil, err
	}
	return t, nil
}

// Size is the number of leaves.
func (t *tree) Size() int64 { return t.n.Load() }

// truncate cuts the tree back to n leaves (n ≤ Size, or the size found
// at open).
func (t *tree) truncate(n int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.f.Truncate(tlog.StoredHashCount(n) * tlog.HashSize); err != nil {
		return fmt.Errorf("truncate tree: %w", err)
	}
	t.n.Store(n)
	clear(t.edge)
	for _, x := range edgeIndexes(n) {
		var h tlog.Hash
		if err := t.readAt(&h, x); err != nil {
			return err
		}
		t.edge[x] = h
	}
	return nil
}

// edgeIndexes returns the stored indexes of the roots of the complete
// subtrees a tree of n leaves splits into (one per bit set in n).
func edgeIndexes(n int64) []int64 {
	var out []int64
	for l := 0; n>>l > 0; l++ {
		if n>>l&1 == 1 {
			out = append(out, tlog.StoredHashIndex(l, n>>l-1))
		}
	}
	return out
}

// append adds one leaf per entry (the 32 raw bytes of an event id) and
// publishes the new size once their hashes are written.
func (t *tree) append(entries [][32]byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	n0 := t.n.Load()
	base := tlog.StoredHashCount(n0)
	pending := make([]tlog.Hash, 0, 2*len(entries)+1)
	r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			if x >= base {
				out[i] = pending[x-base]
				continue
			}
			if h, ok := t.edge[x]; ok {
				out[i] = h
				continue
			}
			if err := t.readAt(&out[i], x); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
	for i := range entries {
		hs, err := tlog.StoredHashes(n0+int64(i), entries[i][:], r)
		if err != nil {
			return fmt.Errorf("tree hashes: %w", err)
		}
		pending = append(pending, hs...)
	}
	buf := make([]byte, 0, len(pending)*tlog.HashSize)
	for _, h := range pending {
		buf = append(buf, h[:]...)
	}
	if _, err := t.f.WriteAt(buf, base*tlog.HashSize); err != nil {
		return fmt.Errorf("write tree: %w", err)
	}
	n1 := n0 + int64(len(entries))
	edge := make(map[int64]tlog.Hash, len(t.edge)+1)
	for _, x := range edgeIndexes(n1) {
		switch h, ok := t.edge[x]; {
		case x >= base:
			edge[x] = pending[x-base]
		case ok:
			edge[x] = h
		default: // never: a root below base was a root before
			if err := t.readAt(&h, x); err != nil {
				return err
			}
			edge[x] = h
		}
	}
	t.edge = edge
	t.n.Store(n1)
	return nil
}

// sync makes the written hashes durable.
func (t *tree) sync() error { return t.f.Sync() }

// Close closes the file.
func (t *tree) Close() error { return t.f.Close() }

func (t *tree) readAt(h *tlog.Hash, idx int64) error {
	_, err := t.f.ReadAt(h[:], idx*tlog.HashSize)
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("tree: stored hash %d beyond the file", idx)
	}
	return err
}

// runGap is how far apart two wanted hashes may be and still be read in
// one pread (a hash tile of level 0 spans about 512 stored hashes).
const runGap = 64

// ReadHashes reads the stored hashes at idx (tlog.HashReader), which must
// lie within the tree's current size; close indexes are read together.
func (t *tree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	limit := tlog.StoredHashCount(t.n.Load())
	order := make([]int, len(idx))
	for i := range order {
		order[i] = i
		if idx[i] < 0 || idx[i] >= limit {
			return nil, fmt.Errorf("tree: stored hash %d beyond the tree", idx[i])
		}
	}
	slices.SortFunc(order, func(a, b int) int { return int(idx[a] - idx[b]) })
	out := make([]tlog.Hash, len(idx))
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && idx[order[j]]-idx[order[j-1]] <= runGap {
			j++
		}
		lo, hi := idx[order[i]], idx[order[j-1]]
		buf := make([]byte, (hi-lo+1)*tlog.HashSize)
		if _, err := t.f.ReadAt(buf, lo*tlog.HashSize); err != nil {
			return nil, fmt.Errorf("read tree: %w", err)
		}
		for _, k := range order[i:j] {
			copy(out[k][:], buf[(idx[k]-lo)*tlog.HashSize:])
		}
		i = j
	}
	return out, nil
}
