package reconcile

import (
	"fmt"
	"math"

	"github.com/anp2net/relay/protocol"
)

// Version is the protocol version byte that starts every message: 0x61,
// Negentropy protocol V1.
const Version byte = 0x61

// MaxMessageSize is the largest message Respond, Session.Reconcile and
// DecodeMessage accept, in bytes.
const MaxMessageSize = 1 << 20

// Error codes of this package, carried by *protocol.Error.
const (
	// CodeBadMessage: the bytes are not a well-formed message.
	CodeBadMessage = "invalid_sync_message"
	// CodeUnsupportedVersion: the peer speaks another protocol version.
	CodeUnsupportedVersion = "unsupported_sync_version"
)

// Mode says what a range's payload is.
type Mode uint8

// The three modes of a range.
const (
	// ModeSkip: the sender has nothing more to say about the range.
	ModeSkip Mode = 0
	// ModeFingerprint: the payload is the fingerprint of the sender's ids in
	// the range.
	ModeFingerprint Mode = 1
	// ModeIDList: the payload lists all the sender's ids in the range.
	ModeIDList Mode = 2
)

const (
	maxVarintLen  = 10
	fingerprintSz = 16
	idSize        = 32
	// maxBoundLen is the longest encoded bound: a 10-byte timestamp, a
	// 1-byte length and a 32-byte prefix.
	maxBoundLen = maxVarintLen + 1 + idSize
)

// Range is one decoded range of a message. Its lower bound is the previous
// range's Upper (the zero Bound for the first).
type Range struct {
	Upper       Bound
	Mode        Mode
	Fingerprint Fingerprint // ModeFingerprint only
	IDs         [][32]byte  // ModeIDList only
}

// DecodeMessage parses a whole message strictly. It returns a
// *protocol.Error with code CodeBadMessage for anything malformed (bad
// varints, bounds that do not increase, unknown modes, truncated or extra
// bytes, messages over MaxMessageSize) and CodeUnsupportedVersion for a
// version byte other than Version. It allocates at most a small multiple of
// len(msg).
func DecodeMessage(msg []byte) ([]Range, error) {
	r, err := newReader(msg)
	if err != nil {
		return nil, err
	}
	var out []Range
	for r.more() {
		rr, err := r.next()
		if err != nil {
			return nil, err
		}
		rg := Range{Upper: rr.upper, Mode: rr.mode, Fingerprint: rr.fp}
		if rr.mode == ModeIDList {
			rg.IDs = make([][32]byte, rr.count())
			for i := range rg.IDs {
				rg.IDs[i] = rr.id(i)
			}
		}
		out = append(out, rg)
	}
	return out, nil
}

// EncodeMessage encodes ranges as a message. It returns an error if the
// upper bounds do not strictly increase from the zero Bound or a mode is
// unknown.
func EncodeMessage(ranges []Range) ([]byte, error) {
	w := newWriter()
	prev := Bound{}
	for i, rg := range ranges {
		if rg.Upper.Compare(prev) <= 0 {
			return nil, fmt.Errorf("encode message: range %d: upper bound does not increase", i)
		}
		prev = rg.Upper
		switch rg.Mode {
		case ModeSkip:
			w.skip(rg.Upper)
		case ModeFingerprint:
			w.fingerprint(rg.Upper, rg.Fingerprint)
		case ModeIDList:
			w.idListHeader(rg.Upper, len(rg.IDs))
			for j := range rg.IDs {
				w.buf = append(w.buf, rg.IDs[j][:]...)
			}
		default:
			return nil, fmt.Errorf("encode message: range %d: unknown mode %d", i, rg.Mode)
		}
	}
	return w.buf, nil
}

func badMessage(format string, args ...any) error {
	return protocol.Errorf(CodeBadMessage, "sync message: "+format, args...)
}

// appendVarint appends v as base-128 digits, most significant first, the
// high bit set on every byte but the last.
func appendVarint(dst []byte, v uint64) []byte {
	var tmp [maxVarintLen]byte
	i := len(tmp) - 1
	tmp[i] = byte(v & 0x7f)
	for v >>= 7; v > 0; v >>= 7 {
		i--
		tmp[i] = byte(v&0x7f) | 0x80
	}
	return append(dst, tmp[i:]...)
}

func varintLen(v uint64) int {
	n := 1
	for v >>= 7; v > 0; v >>= 7 {
		n++
	}
	return n
}

// rawRange is a range as the streaming reader yields it: ids stay in the
// message's bytes.
type rawRange struct {
	upper Bound
	mode  Mode
	fp    Fingerprint
	ids   []byte // ModeIDList: count*32 bytes
}

func (r *rawRange) count() int { return len(r.ids) / idSize }

func (r *rawRange) id(i int) [32]byte { return [32]byte(r.ids[i*idSize:]) }

// reader decodes a message one range at a time, without allocating.
type reader struct {
	buf    []byte
	lastTS uint64 // previous finite timestamp, for delta decoding
	prev   Bound  // upper bound of the previous range
}

// newReader checks the size and version byte of msg.
func newReader(msg []byte) (*reader, error) {
	if len(msg) > MaxMessageSize {
		return nil, badMessage("%d bytes exceeds the limit of %d", len(msg), MaxMessageSize)
	}
	if len(msg) == 0 {
		return nil, badMessage("empty")
	}
	if msg[0] != Version {
		if isVersionByte(msg[0]) {
			return nil, protocol.Errorf(CodeUnsupportedVersion, "sync message: unsupported protocol version 0x%02x (want 0x%02x)", msg[0], Version)
		}
		return nil, badMessage("bad version byte 0x%02x", msg[0])
	}
	return &reader{buf: msg[1:]}, nil
}

// isVersionByte reports whether b is in the range reserved for protocol
// version bytes.
func isVersionByte(b byte) bool { return b >= 0x60 && b <= 0x6f }

func (r *reader) more() bool { return len(r.buf) > 0 }

func (r *reader) next() (rawRange, error) {
	var rg rawRange
	b, err := r.bound()
	if err != nil {
		return rg, err
	}
	if b.Compare(r.prev) <= 0 {
		return rg, badMessage("range bounds do not increase")
	}
	r.prev = b
	rg.upper = b
	m, err := r.varint()
	if err != nil {
		return rg, err
	}
	rg.mode = Mode(m)
	switch {
	case m == uint64(ModeSkip):
	case m == uint64(ModeFingerprint):
		fp, err := r.bytes(fingerprintSz)
		if err != nil {
			return rg, err
		}
		rg.fp = Fingerprint(fp)
	case m == uint64(ModeIDList):
		n, err := r.varint()
		if err != nil {
			return rg, err
		}
		if n > uint64(len(r.buf)/idSize) {
			return rg, badMessage("id list of %d ids overruns the message", n)
		}
		rg.ids, _ = r.bytes(int(n) * idSize)
	default:
		return rg, badMessage("unknown mode %d", m)
	}
	return rg, nil
}

func (r *reader) bound() (Bound, error) {
	t, err := r.varint()
	if err != nil {
		return Bound{}, err
	}
	b := Infinity
	if t != 0 {
		ts := r.lastTS + (t - 1)
		if ts < r.lastTS || ts == math.MaxUint64 {
			return Bound{}, badMessage("timestamp overflows")
		}
		r.lastTS = ts
		b = Bound{Timestamp: ts}
	}
	n, err := r.varint()
	if err != nil {
		return Bound{}, err
	}
	if n > idSize {
		return Bound{}, badMessage("id prefix of %d bytes", n)
	}
	if n > 0 && b.IsInfinity() {
		return Bound{}, badMessage("id prefix on the infinity bound")
	}
	p, err := r.bytes(int(n))
	if err != nil {
		return Bound{}, err
	}
	copy(b.ID[:], p)
	return b, nil
}

// varint reads a minimally encoded varint that fits in 64 bits.
func (r *reader) varint() (uint64, error) {
	var v uint64
	for i, c := range r.buf {
		if i == 0 && c == 0x80 {
			return 0, badMessage("varint with a leading zero digit")
		}
		if v > math.MaxUint64>>7 {
			return 0, badMessage("varint overflows 64 bits")
		}
		v = v<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			r.buf = r.buf[i+1:]
			return v, nil
		}
	}
	return 0, badMessage("truncated varint")
}

func (r *reader) bytes(n int) ([]byte, error) {
	if n > len(r.buf) {
		return nil, badMessage("truncated")
	}
	p := r.buf[:n:n]
	r.buf = r.buf[n:]
	return p, nil
}

// writer builds a message. Bounds must be written in increasing order.
type writer struct {
	buf    []byte
	lastTS uint64
}

func newWriter() *writer { return &writer{buf: []byte{Version}} }

func (w *writer) bound(b Bound) {
	if b.IsInfinity() {
		w.buf = append(w.buf, 0, 0)
		return
	}
	w.buf = appendVarint(w.buf, b.Timestamp-w.lastTS+1)
	w.lastTS = b.Timestamp
	n := b.prefixLen()
	w.buf = append(w.buf, byte(n))
	w.buf = append(w.buf, b.ID[:n]...)
}

func (w *writer) skip(upper Bound) {
	w.bound(upper)
	w.buf = append(w.buf, byte(ModeSkip))
}

func (w *writer) fingerprint(upper Bound, fp Fingerprint) {
	w.bound(upper)
	w.buf = append(w.buf, byte(ModeFingerprint))
	w.buf = append(w.buf, fp[:]...)
}

// idListHeader writes the bound, mode and count of an id list; the caller
// appends the n ids.
func (w *writer) idListHeader(upper Bound, n int) {
	w.bound(upper)
	w.buf = append(w.buf, byte(ModeIDList))
	w.buf = appendVarint(w.buf, uint64(n))
}

// mark and reset let a caller take back what it wrote.
type writerMark struct {
	n      int
	lastTS uint64
}

func (w *writer) mark() writerMark { return writerMark{len(w.buf), w.lastTS} }

func (w *writer) reset(m writerMark) { w.buf, w.lastTS = w.buf[:m.n], m.lastTS }
