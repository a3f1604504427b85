package relay

import (
	"sync"

	"github.com/anp2net/relay/protocol"
)

// seenEntryBytes is what one remembered header costs the replay set: its
// 32-byte id, its expiry, and the map and bucket slots that hold them.
const seenEntryBytes = 96

// defaultAuthReplayBytes is Config.AuthReplayBytes's default: 16 MiB,
// about 175,000 headers, which is 1,450 accepted headers a second for
// as long as each stays valid (two minutes).
const defaultAuthReplayBytes = 16 << 20

// seenIDs remembers the id of every D4 header accepted until the header
// expires, so each is good for one request. It is bounded in bytes: when
// full of headers that have not expired it refuses new ones (auth_busy)
// rather than forget one early, which would let it be replayed.
type seenIDs struct {
	mu  sync.Mutex
	max int                   // entries
	ids map[[32]byte]struct{} // remembered ids
	exp map[int64][][32]byte  // ids by expiry (unix s)
	low int64                 // no bucket below this expiry is left
}

func newSeenIDs(maxBytes int64) *seenIDs {
	if maxBytes <= 0 {
		maxBytes = defaultAuthReplayBytes
	}
	return &seenIDs{max: int(max(1, maxBytes/seenEntryBytes)), ids: map[[32]byte]struct{}{}, exp: map[int64][][32]byte{}}
}

// use records the header id (64 hex) valid until expires (unix s) at now,
// or returns auth_replayed when it was already used, or a 503 auth_busy
// (Retry-After: until the oldest expires) when the set is full.
func (s *seenIDs) use(id string, expires, now int64) error {
	var k [32]byte
	if !protocol.IsHex64(id) {
		return unauthorized("Authorization event id is malformed")
	}
	for i := range k {
		k[i] = unhex(id[2*i])<<4 | unhex(id[2*i+1])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now)
	if _, ok := s.ids[k]; ok {
		return protocol.Errorf(CodeAuthReplayed, "this Authorization header was already used: sign a new one for each request")
	}
	if len(s.ids) >= s.max {
		return &retryError{protocol.Errorf(CodeAuthBusy, "the relay holds as many unexpired Authorization headers as it may; retry shortly"), retrySecondsUnix(s.low - now + 1)}
	}
	s.ids[k] = struct{}{}
	s.exp[expires] = append(s.exp[expires], k)
	if len(s.ids) == 1 || expires < s.low {
		s.low = expires
	}
	return nil
}

// sweep forgets every id whose header expired before now.
func (s *seenIDs) sweep(now int64) {
	if len(s.ids) == 0 {
		return
	}
	if now-s.low > 4*AuthMaxSkew {
		// A clock moved far (tests) or a long quiet spell: walk the buckets
		// rather than every second in between.
		for t, ids := range s.exp {
			if t < now {
				s.forget(t, ids)
			}
		}
		s.low = now
		return
	}
	for ; s.low < now; s.low++ {
		s.forget(s.low, s.exp[s.low])
	}
}

func (s *seenIDs) forget(t int64, ids [][32]byte) {
	for _, k := range ids {
		delete(s.ids, k)
	}
	delete(s.exp, t)
}

func unhex(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

func retrySecondsUnix(d int64) int { return int(max(1, d)) }
