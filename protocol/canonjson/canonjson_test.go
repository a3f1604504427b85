package canonjson

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/gowebpki/jcs"
)

// oracle is the general path: json.Marshal, then RFC 8785.
func oracle(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jcs.Transform(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzScalarsMatchJCS checks the string, integer and float encodings one
// value at a time against the oracle, including invalid UTF-8, integers
// beyond 2^53 and exponent-form floats.
func FuzzScalarsMatchJCS(f *testing.F) {
	f.Add("", int64(0), 0.0)
	f.Add("a\"\\\x00\x1f\x7f<>&\u2028é\xff", int64(-1), -0.0)
	f.Add("ctl\x01\b\t\n\f\r bad\xed\xa0\x80 🎉", int64(1<<53), 1e-7)
	f.Add("y", int64(1<<53+1), 1e21)
	f.Add("z", int64(math.MinInt64), -1.5e-300)
	f.Add("w", int64(math.MaxInt64), 123456.000001)
	f.Add("v", int64(-9007199254740993), 5e-324)
	f.Fuzz(func(t *testing.T, s string, n int64, x float64) {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return
		}
		got := append([]byte{'['}, AppendString(nil, s)...)
		got = append(AppendInt(append(got, ','), n), ',')
		got = append(AppendFloat(got, x), ']')
		if want := oracle(t, []any{s, n, x}); !bytes.Equal(got, want) {
			t.Fatalf("got %q want %q", got, want)
		}
	})
}

func TestFloats(t *testing.T) {
	for _, x := range []float64{0, 1, 0.5, 0.875, 1e-6, 1e-7, 123456.789012, 1e21, 1e22, 3.0000001} {
		if got, want := AppendFloat(nil, x), oracle(t, x); !bytes.Equal(got, want) {
			t.Errorf("%v: %s, want %s", x, got, want)
		}
	}
}

func TestFloatPanicsOnNonFinite(t *testing.T) {
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("AppendFloat(%v) did not panic", x)
				}
			}()
			AppendFloat(nil, x)
		}()
	}
}
