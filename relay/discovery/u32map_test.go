package discovery

import (
	"math/rand/v2"
	"testing"
)

// TestU32MapAgainstMap: random sets, updates and deletions (keys from a
// small range, so runs collide and wrap) leave the table equal to a Go map
// after every step.
func TestU32MapAgainstMap(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var m u32map
		want := map[uint32]uint32{}
		keys := uint32(4 + rng.IntN(300))
		for step := range 5000 {
			k := rng.Uint32N(keys)
			if rng.IntN(3) == 0 && seed%2 == 0 {
				k *= 1 << 20 // same low bits
			}
			v := uint32(0)
			if rng.IntN(5) < 3 {
				v = 1 + rng.Uint32N(9)
			}
			m.set(k, v)
			if v == 0 {
				delete(want, k)
			} else {
				want[k] = v
			}
			if m.len() != len(want) {
				t.Fatalf("seed %d step %d: len %d, want %d", seed, step, m.len(), len(want))
			}
			if step%97 == 0 || step > 4900 {
				n := 0
				for _, s := range m.slots {
					if s.v != 0 {
						n++
						if want[s.k] != s.v {
							t.Fatalf("seed %d step %d: slot %d=%d, want %d", seed, step, s.k, s.v, want[s.k])
						}
					}
				}
				for wk, wv := range want {
					if got := m.get(wk); got != wv {
						t.Fatalf("seed %d step %d: get %d = %d, want %d", seed, step, wk, got, wv)
					}
				}
				if n != len(want) || m.get(keys+1) != 0 {
					t.Fatalf("seed %d step %d: %d slots in use, want %d", seed, step, n, len(want))
				}
			}
		}
	}
}
