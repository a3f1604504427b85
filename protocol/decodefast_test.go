package protocol

import (
	"bufio"
	"os"
	"reflect"
	"testing"
)

// TestFastDecodeTakesRealEvents checks that the one-pass decoder handles
// every event of the public network sample itself (so the fast path is
// really taken) and builds exactly what the reference decoder builds.
func TestFastDecodeTakesRealEvents(t *testing.T) {
	f, err := os.Open("../testdata/vectors/anp2-network-sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		slow, err := decodeSlow(sc.Bytes())
		if err != nil {
			continue
		}
		fast, ok := decodeFast(sc.Bytes())
		if !ok || !reflect.DeepEqual(fast, slow) {
			t.Fatalf("line %d: fast path ok=%v\nfast %#v\nslow %#v", n+1, ok, fast, slow)
		}
		n++
	}
	if n < 400 {
		t.Fatalf("only %d events decoded", n)
	}
}

func BenchmarkDecodeJSON(b *testing.B) {
	e := signed(1, `{"score":0.5,"reason":"seen \"their\" work"}`, []string{"p", "0000000000000000000000000000000000000000000000000000000000000000"})
	raw := AppendJSON(nil, e)
	for _, c := range []struct {
		name string
		f    func([]byte) (*Event, error)
	}{{"fast", DecodeJSON}, {"reference", decodeSlow}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.f(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
