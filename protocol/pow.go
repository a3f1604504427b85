package protocol

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"strconv"
)

// LeadingZeroBits counts the leading zero bits of id, most significant bit of
// byte 0 first (NIP-13 counting, D3).
func LeadingZeroBits(id [32]byte) int {
	n := 0
	for _, b := range id {
		if b == 0 {
			n += 8
			continue
		}
		return n + bits.LeadingZeros8(b)
	}
	return n
}

// PoWPolicy says which events must carry proof of work (D3).
type PoWPolicy struct {
	// MinBits is the minimum committed difficulty on mandatory kinds.
	MinBits int
	// Kinds must carry a pow tag.
	Kinds map[int64]bool
	// ActiveFrom exempts events created before it from the mandatory rule
	// (history from before PoW became mandatory stays importable); an
	// over-claiming pow tag is rejected whatever the date.
	ActiveFrom int64
}

// DefaultPoWPolicy is 12 bits on kinds 0 and 50 for events created from
// 2026-05-24T00:00:00Z, the first day after PoW became mandatory on the
// public network.
func DefaultPoWPolicy() PoWPolicy {
	return PoWPolicy{MinBits: 12, Kinds: map[int64]bool{0: true, 50: true}, ActiveFrom: 1779580800}
}

// Mandatory reports whether e must carry a pow tag under p.
func (p PoWPolicy) Mandatory(e *Event) bool {
	return p.Kinds[e.Kind] && e.CreatedAt >= p.ActiveFrom
}

// DeclaredPoW returns the committed difficulty of the first pow tag. present
// is false when there is no pow tag; err is a pow_malformed *Error when the tag
// has no value or the value is not a decimal number in 0..256.
func DeclaredPoW(e *Event) (n int, present bool, err error) {
	for _, t := range e.Tags {
		if len(t) == 0 || t[0] != "pow" {
			continue
		}
		if len(t) < 2 || !decimalInt.MatchString(t[1]) || len(t[1]) > 3 {
			return 0, true, Errorf(CodePoWMalformed, "pow tag malformed")
		}
		n, _ = strconv.Atoi(t[1])
		if n > 256 {
			return 0, true, Errorf(CodePoWMalformed, "pow tag malformed")
		}
		return n, true, nil
	}
	return 0, false, nil
}

// Check validates e's proof of work under p. id must be e's verified id.
func (p PoWPolicy) Check(e *Event, id [32]byte) error {
	declared, present, err := DeclaredPoW(e)
	if err != nil {
		return err
	}
	mandatory := p.Mandatory(e)
	if !present {
		if mandatory {
			return Errorf(CodePoWRequired, "PoW: pow tag required for kind %d", e.Kind)
		}
		return nil
	}
	if mandatory && declared < p.MinBits {
		return Errorf(CodePoWBelowMinimum, "pow_below_minimum (declared %d, min %d)", declared, p.MinBits)
	}
	if found := LeadingZeroBits(id); found < declared {
		return Errorf(CodePoWNotMet, "pow_does_not_meet_declared (claimed %d bits, found %d)", declared, found)
	}
	return nil
}

// Mine sets a ["pow", bits] tag and searches ["nonce", n] values until the id
// has at least bits leading zero bits. Existing pow and nonce tags are
// replaced. e.AgentID must already be the signer's, since the id covers it.
// It returns ctx.Err() if ctx ends first; id and signature are left for Sign.
func Mine(ctx context.Context, e *Event, difficulty int) error {
	kept := e.Tags[:0:0]
	for _, t := range e.Tags {
		if len(t) > 0 && (t[0] == "pow" || t[0] == "nonce") {
			continue
		}
		kept = append(kept, t)
	}
	nonceTag := []string{"nonce", "0"}
	e.Tags = append(kept, []string{"pow", strconv.Itoa(difficulty)}, nonceTag)
	buf := make([]byte, 0, 256+len(e.Content))
	// The search starts at a random nonce, so two drafts alike in every
	// other field (two registrations of one trigger spec in one second)
	// come out as two events.
	var r [4]byte
	_, _ = rand.Read(r[:])
	start := uint64(binary.BigEndian.Uint32(r[:]))
	for n := start; ; n++ {
		if (n-start)&0xfff == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		nonceTag[1] = strconv.FormatUint(n, 10)
		buf = AppendCanonicalPayload(buf[:0], e)
		if LeadingZeroBits(sha256.Sum256(buf)) >= difficulty {
			return nil
		}
	}
}
