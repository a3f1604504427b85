package reconcile

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"math/rand/v2"
	"testing"
)

// TestFingerprintVectors checks the fingerprint against the published
// Negentropy V1 test vectors.
func TestFingerprintVectors(t *testing.T) {
	ids := []string{
		"eb6b05c2e3b008592ac666594d78ed83e7b9ab30f825b9b08878128f7500008c",
		"39b916432333e069a4386917609215cc688eb99f06fed01aadc29b1b4b92d6f0",
		"abc81d58ebe3b9a87100d47f58bf15e9b1cbf62d38623f11d0f0d17179f5f3ba",
	}
	want := []string{"6d74e1212fcafc8a81d090f0ffbde8b0", "96b26d110825d4b1805fc56988a3e65d", "c15ce60f185fd24ae341076caa93daa5"}
	var items []Item
	var set [][32]byte
	for i, h := range ids {
		id := mustID(t, h)
		items = append(items, Item{CreatedAt: 1678011277 + int64(i), ID: id})
		set = append(set, id)
		if got := hex.EncodeToString(fp(FingerprintOf(set))); got != want[i] {
			t.Errorf("FingerprintOf(%d ids) = %s, want %s", i+1, got, want[i])
		}
		if n, got := NewIndex(items).Fingerprint(Bound{}, Infinity); n != i+1 || hex.EncodeToString(fp(got)) != want[i] {
			t.Errorf("Index.Fingerprint over %d items = %d, %x, want %s", i+1, n, got, want[i])
		}
	}
}

func fp(f Fingerprint) []byte { return f[:] }

func mustID(t *testing.T, h string) [32]byte {
	t.Helper()
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 32 {
		t.Fatalf("bad id %q", h)
	}
	return [32]byte(b)
}

func TestMinimalBound(t *testing.T) {
	id := func(b ...byte) (out [32]byte) { copy(out[:], b); return out }
	tests := []struct {
		name       string
		prev, next Item
		want       Bound
		wantLen    int
	}{
		{"timestamps differ", Item{5, id(9, 9)}, Item{7, id(1)}, Bound{Timestamp: 7}, 0},
		{"first byte differs", Item{5, id(1, 7)}, Item{5, id(2, 3)}, Bound{5, id(2)}, 1},
		{"shared prefix", Item{5, id(1, 2, 3)}, Item{5, id(1, 2, 4, 8)}, Bound{5, id(1, 2, 4)}, 3},
		{"last byte differs", Item{5, id()}, Item{5, func() [32]byte { x := id(); x[31] = 1; return x }()}, Bound{5, func() [32]byte { x := id(); x[31] = 1; return x }()}, 32},
		{"zero timestamp", Item{0, id(0, 1)}, Item{0, id(0, 2)}, Bound{0, id(0, 2)}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := minimalBound(tt.prev, tt.next)
			if b != tt.want || b.prefixLen() != tt.wantLen {
				t.Fatalf("got %v (len %d), want %v (len %d)", b, b.prefixLen(), tt.want, tt.wantLen)
			}
			if b.cmpItem(tt.prev) <= 0 || b.cmpItem(tt.next) > 0 {
				t.Fatalf("bound %v not in (prev, next]", b)
			}
		})
	}
}

// TestItemCompare: Compare orders by created_at, then by id bytewise, on
// random ids and on ids that share prefixes of every length.
func TestItemCompare(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var items []Item
	for range 300 {
		var it Item
		it.CreatedAt = r.Int64N(3)
		fillID(r, &it.ID)
		if len(items) > 0 && r.IntN(2) == 0 { // share a prefix with an earlier id
			o := items[r.IntN(len(items))]
			copy(it.ID[:r.IntN(33)], o.ID[:])
		}
		items = append(items, it)
	}
	for _, a := range items {
		for _, b := range items {
			want := cmp.Compare(a.CreatedAt, b.CreatedAt)
			if want == 0 {
				want = bytes.Compare(a.ID[:], b.ID[:])
			}
			if got := a.Compare(b); got != want {
				t.Fatalf("Compare(%v, %v) = %d, want %d", a, b, got, want)
			}
		}
	}
}
