package credit

import (
	"fmt"
	"math/big"
	"math/bits"
	"strconv"
)

// Amount is an exact whole number of credits. It is 128-bit so that sums of
// many rewards up to 2^53-1 never wrap; in JSON it is a plain integer.
type Amount struct {
	hi int64
	lo uint64
}

// AmountOf returns n as an Amount.
func AmountOf(n int64) Amount { return Amount{hi: n >> 63, lo: uint64(n)} }

// Add returns a + b.
func (a Amount) Add(b Amount) Amount {
	lo, carry := bits.Add64(a.lo, b.lo, 0)
	return Amount{hi: a.hi + b.hi + int64(carry), lo: lo}
}

// Sub returns a − b.
func (a Amount) Sub(b Amount) Amount {
	lo, borrow := bits.Sub64(a.lo, b.lo, 0)
	return Amount{hi: a.hi - b.hi - int64(borrow), lo: lo}
}

// Sign returns -1, 0 or +1.
func (a Amount) Sign() int {
	switch {
	case a.hi < 0:
		return -1
	case a.hi == 0 && a.lo == 0:
		return 0
	}
	return 1
}

// IsZero reports whether a is 0.
func (a Amount) IsZero() bool { return a.hi == 0 && a.lo == 0 }

// Int64 returns a as an int64; ok is false when it does not fit.
func (a Amount) Int64() (n int64, ok bool) {
	return int64(a.lo), a.hi == int64(a.lo)>>63
}

// Big returns a as a big.Int.
func (a Amount) Big() *big.Int {
	x := new(big.Int).SetInt64(a.hi)
	x.Lsh(x, 64)
	return x.Add(x, new(big.Int).SetUint64(a.lo))
}

// String returns a in decimal.
func (a Amount) String() string {
	if n, ok := a.Int64(); ok {
		return strconv.FormatInt(n, 10)
	}
	return a.Big().String()
}

// MarshalJSON encodes a as a JSON integer.
func (a Amount) MarshalJSON() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalJSON decodes a JSON integer.
func (a *Amount) UnmarshalJSON(b []byte) error {
	x, ok := new(big.Int).SetString(string(b), 10)
	if !ok || x.BitLen() > 127 {
		return fmt.Errorf("credit amount %q is not an integer within 128 bits", b)
	}
	lo := new(big.Int).And(x, new(big.Int).SetUint64(^uint64(0)))
	hi := new(big.Int).Rsh(x, 64)
	*a = Amount{hi: hi.Int64(), lo: lo.Uint64()}
	return nil
}
