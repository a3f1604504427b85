// Package binform is the compact binary encoding of the folds' saved
// state (SPEC §2.2): varints, length-prefixed strings and byte runs, and a
// table of strings written once and then named by index. A Reader never
// panics on hostile input and never allocates more than the input could
// describe: every count is checked against the bytes that remain before
// anything is allocated for it. Errors are sticky: after the first one
// every read returns zero values and Err reports it.
package binform

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
)

// ErrCorrupt reports saved bytes that do not decode.
var ErrCorrupt = errors.New("saved form is malformed")

// Writer appends encoded values to a buffer.
type Writer struct{ b []byte }

// NewWriter returns a Writer that starts with the magic header.
func NewWriter(magic string) *Writer {
	w := &Writer{}
	w.String(magic)
	return w
}

// Bytes returns the encoded buffer.
func (w *Writer) Bytes() []byte { return w.b }

// Uvarint appends v.
func (w *Writer) Uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

// Varint appends v, zigzag-encoded.
func (w *Writer) Varint(v int64) { w.b = binary.AppendVarint(w.b, v) }

// Int appends a non-negative count or index.
func (w *Writer) Int(v int) { w.Uvarint(uint64(v)) }

// Bool appends v as one byte.
func (w *Writer) Bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// Float64 appends v's IEEE 754 bits, 8 bytes little-endian.
func (w *Writer) Float64(v float64) { w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(v)) }

// String appends len(s) then s.
func (w *Writer) String(s string) {
	w.Int(len(s))
	w.b = append(w.b, s...)
}

// Raw appends b as it is (fixed-size fields: the reader knows the length).
func (w *Writer) Raw(b []byte) { w.b = append(w.b, b...) }

// Reader decodes what a Writer wrote.
type Reader struct {
	b      []byte
	err    error
	shared map[string]string
}

// NewReader returns a Reader over b that has checked the magic header.
func NewReader(b []byte, magic string) *Reader {
	r := &Reader{b: b}
	if got := r.String(); r.err == nil && got != magic {
		r.fail("header %q, want %q", got, magic)
	}
	return r
}

// Err returns the first error met, nil when every read succeeded.
func (r *Reader) Err() error { return r.err }

// Done reports an error when bytes remain after the last field.
func (r *Reader) Done() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	return r.err
}

// Fail records an error found by the caller (a value out of its rules):
// the saved form is then malformed like any undecodable one.
func (r *Reader) Fail(format string, args ...any) { r.fail(format, args...) }

func (r *Reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	r.b = nil
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Varint reads a zigzag varint.
func (r *Reader) Varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Count reads a number of items each at least minBytes long in the
// encoding (minBytes ≥ 1): a count the remaining input cannot hold is an
// error, so a caller may allocate for it.
func (r *Reader) Count(minBytes int) int {
	v := r.Uvarint()
	if r.err != nil {
		return 0
	}
	if minBytes < 1 {
		minBytes = 1
	}
	if v > uint64(len(r.b)/minBytes) {
		r.fail("count %d exceeds the %d bytes left", v, len(r.b))
		return 0
	}
	return int(v)
}

// Index reads an index below n.
func (r *Reader) Index(n int) int {
	v := r.Uvarint()
	if r.err == nil && v >= uint64(n) {
		r.fail("index %d out of range %d", v, n)
		return 0
	}
	return int(v)
}

// Bool reads one byte that must be 0 or 1.
func (r *Reader) Bool() bool {
	b := r.Raw(1)
	if r.err != nil {
		return false
	}
	if b[0] > 1 {
		r.fail("bool byte %d", b[0])
		return false
	}
	return b[0] == 1
}

// Float64 reads 8 bytes of IEEE 754 bits.
func (r *Reader) Float64() float64 {
	b := r.Raw(8)
	if r.err != nil {
		return 0
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}

// Raw returns the next n bytes (sharing the input; nil on an error).
func (r *Reader) Raw(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail("%d bytes wanted, %d left", n, len(r.b))
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

// String reads a length-prefixed string (a copy).
func (r *Reader) String() string {
	n := r.Count(1)
	return string(r.Raw(n))
}

// maxShared bounds the strings Shared keeps one copy of.
const maxShared = 128

// Shared reads a length-prefixed string like String, returning one copy
// per distinct value for short strings (categories, reasons, verdicts).
func (r *Reader) Shared() string {
	n := r.Count(1)
	b := r.Raw(n)
	if n > maxShared {
		return string(b)
	}
	if s, ok := r.shared[string(b)]; ok {
		return s
	}
	if r.shared == nil {
		r.shared = map[string]string{}
	}
	s := string(b)
	r.shared[s] = s
	return s
}

// ID appends an event id: its 32 bytes when it is 64 lowercase hex digits
// (every stored id), else the string as it is.
func (w *Writer) ID(id string) {
	var raw [32]byte
	if len(id) == 64 && isLowerHex(id) {
		hex.Decode(raw[:], []byte(id))
		w.Bool(true)
		w.Raw(raw[:])
		return
	}
	w.Bool(false)
	w.String(id)
}

// ID reads what Writer.ID wrote.
func (r *Reader) ID() string {
	if r.Bool() {
		return hex.EncodeToString(r.Raw(32))
	}
	return r.String()
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Times appends a sorted list of times: its length, the first, then the
// differences.
func (w *Writer) Times(ts []int64) {
	w.Int(len(ts))
	for i, t := range ts {
		if i == 0 {
			w.Varint(t)
		} else {
			w.Uvarint(uint64(t - ts[i-1]))
		}
	}
}

// Times reads what Writer.Times wrote; a list that is not sorted (the
// differences wrapped) is an error.
func (r *Reader) Times() []int64 {
	n := r.Count(1)
	if n == 0 || r.err != nil {
		return nil
	}
	ts := make([]int64, n)
	for i := range ts {
		if i == 0 {
			ts[i] = r.Varint()
		} else {
			ts[i] = ts[i-1] + int64(r.Uvarint())
			if ts[i] < ts[i-1] {
				r.fail("times out of order")
			}
		}
	}
	if r.err != nil {
		return nil
	}
	return ts
}

// Strings is a table of distinct strings written once and then referred
// to by index (agent ids in the folds' saved forms).
type Strings struct {
	index map[string]int
	list  []string
}

// Ref returns s's index in the table, adding it when new.
func (t *Strings) Ref(s string) int {
	if i, ok := t.index[s]; ok {
		return i
	}
	if t.index == nil {
		t.index = map[string]int{}
	}
	t.index[s] = len(t.list)
	t.list = append(t.list, s)
	return len(t.list) - 1
}

// WriteTable appends list: a count, then each string.
func (w *Writer) WriteTable(list []string) {
	w.Int(len(list))
	for _, s := range list {
		w.String(s)
	}
}

// List returns the table's strings in index order.
func (t *Strings) List() []string { return t.list }

// ReadTable reads a table WriteTable wrote; a string twice is an error.
func (r *Reader) ReadTable() []string {
	n := r.Count(1)
	list := make([]string, 0, n)
	seen := make(map[string]struct{}, n)
	for range n {
		s := r.String()
		if r.err != nil {
			return nil
		}
		if _, dup := seen[s]; dup {
			r.fail("string %q twice in a table", s)
			return nil
		}
		seen[s] = struct{}{}
		list = append(list, s)
	}
	return list
}

// ReadAll reads r to its end like io.ReadAll, in one allocation when r
// tells its length (a *bytes.Reader of a saved view does).
func ReadAll(r io.Reader) ([]byte, error) {
	lr, ok := r.(interface{ Len() int })
	if !ok {
		return io.ReadAll(r)
	}
	b := make([]byte, lr.Len())
	n, err := io.ReadFull(r, b)
	if err != nil {
		return nil, err
	}
	if rest, err := io.ReadAll(r); err != nil || len(rest) > 0 {
		return append(b[:n], rest...), err
	}
	return b, nil
}
