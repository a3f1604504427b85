package binform

import (
	"slices"
	"strings"
	"testing"
)

// TestRoundTrip writes one value of every kind and reads them back.
func TestRoundTrip(t *testing.T) {
	id := strings.Repeat("0f", 32)
	w := NewWriter("test/1")
	w.Uvarint(1 << 60)
	w.Varint(-5)
	w.Bool(true)
	w.Float64(0.25)
	w.String("héllo")
	w.ID(id)
	w.ID("not-hex")
	w.Times([]int64{-3, 4, 4, 1 << 53})
	w.WriteTable([]string{"a", "b"})
	if len(w.Bytes()) > 120 {
		t.Fatalf("%d bytes: the hex id was not written as 32 bytes", len(w.Bytes()))
	}
	r := NewReader(w.Bytes(), "test/1")
	if r.Uvarint() != 1<<60 || r.Varint() != -5 || !r.Bool() || r.Float64() != 0.25 || r.String() != "héllo" ||
		r.ID() != id || r.ID() != "not-hex" || !slices.Equal(r.Times(), []int64{-3, 4, 4, 1 << 53}) ||
		!slices.Equal(r.ReadTable(), []string{"a", "b"}) || r.Done() != nil {
		t.Fatalf("round trip failed: %v", r.Err())
	}
	if NewReader(w.Bytes(), "test/2").Err() == nil {
		t.Fatal("another header accepted")
	}
}

// TestCountBoundedByInput checks that a count the input cannot hold is an
// error before any allocation is sized by it.
func TestCountBoundedByInput(t *testing.T) {
	w := &Writer{}
	w.Uvarint(1 << 40)
	w.Raw(make([]byte, 100))
	r := &Reader{b: w.Bytes()}
	if n := r.Count(1); n != 0 || r.Err() == nil {
		t.Fatalf("count %d accepted from 100 bytes", n)
	}
}

// FuzzReader reads arbitrary bytes as a sequence of every kind of value,
// driven by the first bytes: it must never panic, and a count it returns
// never exceeds the bytes that were left.
func FuzzReader(f *testing.F) {
	w := NewWriter("x")
	w.WriteTable([]string{"a", "bb"})
	w.Times([]int64{1, 2, 3})
	w.ID("ab")
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, w.Bytes())
	f.Add([]byte{9, 9, 9}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, ops, b []byte) {
		r := &Reader{b: b}
		for _, op := range ops {
			left := len(r.b) // the bytes not read yet
			switch op % 12 {
			case 0:
				if n := r.Count(int(op/12) + 1); n > left {
					t.Fatalf("count %d from %d bytes", n, left)
				}
			case 1:
				r.Uvarint()
			case 2:
				r.Varint()
			case 3:
				r.Bool()
			case 4:
				r.Float64()
			case 5:
				_ = r.String()
			case 6:
				r.Shared()
			case 7:
				r.ID()
			case 8:
				if ts := r.Times(); !slices.IsSorted(ts) {
					t.Fatalf("times out of order: %v", ts)
				}
			case 9:
				if l := r.ReadTable(); len(l) > left {
					t.Fatalf("table of %d from %d bytes", len(l), left)
				}
			case 10:
				r.Index(int(op))
			case 11:
				r.Raw(int(op) - 100)
			}
		}
		r.Done()
	})
}
