package client

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
)

// MinPoW is the proof of work the relay requires on kinds 0 and 50 (SPEC
// §1.4), in leading zero bits of the id.
const MinPoW = 12

// powKinds must carry a pow tag of at least MinPoW bits.
var powKinds = map[int64]bool{protocol.KindProfile: true, protocol.KindTaskRequest: true}

// Sign completes e as id's event: it sets agent_id, created_at (now,
// unless e already has one), mines proof of work when e's kind requires it
// (MinPoW bits) or e already declares a ["pow", N] tag (N bits) its id
// does not meet yet, then sets the id and signature. It returns ctx.Err() if ctx ends while mining.
func Sign(ctx context.Context, id *Identity, e *protocol.Event, now time.Time) error {
	e.AgentID = id.AgentID()
	if e.CreatedAt == 0 {
		e.CreatedAt = now.Unix()
	}
	if e.Tags == nil {
		e.Tags = [][]string{}
	}
	bits, declared := 0, 0
	if n, present, err := protocol.DeclaredPoW(e); err == nil && present {
		bits, declared = n, n
	}
	if powKinds[e.Kind] && bits < MinPoW {
		bits = MinPoW
	}
	if bits > 0 && (declared < bits || protocol.LeadingZeroBits(e.ComputeID()) < declared) {
		if err := MinePoW(ctx, e, bits, 0); err != nil {
			return err
		}
	}
	e.Sign(id.PrivateKey())
	return nil
}

// MinePoW sets ["pow", bits] and a ["nonce", …] tag on e (replacing any
// earlier ones) such that e's id has at least bits leading zero bits,
// searching on workers goroutines (0: one per CPU). e.AgentID and
// e.CreatedAt must be final, since the id covers them; the id and
// signature are left to Sign. It returns ctx.Err() if ctx ends first.
func MinePoW(ctx context.Context, e *protocol.Event, bits, workers int) error {
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	kept := make([][]string, 0, len(e.Tags)+2)
	for _, t := range e.Tags {
		if len(t) > 0 && (t[0] == "pow" || t[0] == "nonce") {
			continue
		}
		kept = append(kept, t)
	}
	kept = append(kept, []string{"pow", strconv.Itoa(bits)})
	// A random start: two miners of the same draft (two registrations of
	// one trigger spec in one second) find different nonces.
	var b [4]byte
	rand.Read(b[:])
	base := uint64(binary.BigEndian.Uint32(b[:])) << 16
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var once sync.Once
	var found string
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n, ok := mineFrom(ctx, e, kept, bits, base+uint64(w), workers); ok {
				once.Do(func() { found = n; cancel() })
			}
		}()
	}
	wg.Wait()
	if found == "" {
		return ctx.Err()
	}
	e.Tags = append(kept, []string{"nonce", found})
	return nil
}

// mineFrom tries nonces w, w+step, w+2·step … and returns the first that
// meets bits.
func mineFrom(ctx context.Context, e *protocol.Event, kept [][]string, bits int, from uint64, step int) (string, bool) {
	nonce := []string{"nonce", ""}
	c := protocol.Event{AgentID: e.AgentID, CreatedAt: e.CreatedAt, Kind: e.Kind, Content: e.Content,
		Tags: append(kept[:len(kept):len(kept)], nonce)}
	buf := make([]byte, 0, 256+len(e.Content))
	for i, n := 0, from; ; i, n = i+1, n+uint64(step) {
		if i&0x3ff == 0 && ctx.Err() != nil {
			return "", false
		}
		nonce[1] = strconv.FormatUint(n, 10)
		buf = protocol.AppendCanonicalPayload(buf[:0], &c)
		if protocol.LeadingZeroBits(sha256.Sum256(buf)) >= bits {
			return nonce[1], true
		}
	}
}

// VerifyEvent checks e as the relay does before it trusts an event: the
// id re-derives from the payload (RFC 8785), the signature verifies under
// libsodium's rules (SPEC §1.7: small-order and non-canonical keys and R
// refused), and a ["pow", N] tag it carries is met. It returns the first
// failure, an error whose protocol code (protocol.CodeOf) names it.
func VerifyEvent(e *protocol.Event) error {
	if err := e.CheckID(); err != nil {
		return err
	}
	if err := e.CheckSig(); err != nil {
		return err
	}
	return protocol.PoWPolicy{}.Check(e, e.ComputeID())
}
