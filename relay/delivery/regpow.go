package delivery

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

// CodeTriggerPoW: a trigger registration whose Authorization event lacks
// the proof of work the relay asks (400), or reuses one (400).
const CodeTriggerPoW = "trigger_pow_required"

// spentAuth remembers the ids of the Authorization events that paid for
// a trigger, for as long as they could be replayed (twice the ±60 s
// window), so one proof of work registers one trigger. Each entry cost
// its sender the proof of work, which bounds how fast the set grows; it
// is pruned of expired ids whenever it doubles past 1,024 entries, and
// holds at most maxSpent (about 100 bytes each).
type spentAuth struct {
	mu   sync.Mutex
	ids  map[string]int64 // id → relay time (s) after which it may be forgotten
	high int
}

// maxSpent caps spentAuth: past it, registrations wait (429) until the
// oldest proofs expire.
const maxSpent = 1 << 16

// use records id until expires and reports whether it was new; full
// says the set is at maxSpent (nothing recorded).
func (s *spentAuth) use(id string, now, expires int64) (fresh, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids, s.high = map[string]int64{}, 1024
	}
	if _, ok := s.ids[id]; ok {
		return false, false
	}
	if len(s.ids) >= s.high {
		for k, exp := range s.ids {
			if exp < now {
				delete(s.ids, k)
			}
		}
		s.high = max(1024, 2*len(s.ids))
	}
	if len(s.ids) >= maxSpent {
		return false, true
	}
	s.ids[id] = expires
	return true, false
}

// registrant authenticates a trigger registration and checks what it
// costs (SPEC §16): with TriggerPoW > 0, the D4 Authorization event must
// commit a payload (the trigger spec) and carry ["pow", "<n>"] with n at
// least TriggerPoW and an id with that many leading zero bits (D3), and
// may pay for one trigger only. It returns the owner.
func (m *Module) registrant(c echo.Context) (string, error) {
	e, err := m.core.ReaderEvent(c)
	if err != nil {
		return "", err
	}
	if e == nil {
		_, err := m.reader(c) // the 401
		return "", err
	}
	need := m.opts.TriggerPoW
	if need <= 0 {
		return e.AgentID, nil
	}
	declared, err := strconv.Atoi(e.TagValue("pow"))
	id, herr := hex.DecodeString(e.ID)
	if err != nil || declared < need || herr != nil || len(id) != 32 || protocol.LeadingZeroBits([32]byte(id)) < declared || e.TagValue("payload") == "" {
		return "", protocol.Errorf(CodeTriggerPoW, "registering a trigger costs proof of work: the Authorization event needs a payload tag (the SHA-256 of the body), [\"pow\", \"%d\"] or more, and an id with that many leading zero bits", need)
	}
	now := m.core.Now()
	fresh, full := m.spent.use(e.ID, now, e.CreatedAt+2*60+1)
	if full {
		return "", &httpx.RetryError{Err: protocol.Errorf(relay.CodeRateLimited, "too many trigger registrations in the last two minutes"), After: 60}
	}
	if !fresh {
		return "", protocol.Errorf(CodeTriggerPoW, "this Authorization event already paid for a trigger: mine a new one")
	}
	return e.AgentID, nil
}

// RegistrationAuth returns a D4 Authorization header for POST url with
// body (a trigger spec) signed by priv at unix time now, its event mined
// to bits leading zero bits (D3) as a trigger registration costs. It
// fails only when ctx ends first.
func RegistrationAuth(ctx context.Context, priv ed25519.PrivateKey, url string, body []byte, now int64, bits int) (string, error) {
	sum := sha256.Sum256(body)
	e := &protocol.Event{AgentID: protocol.AgentIDOf(priv), CreatedAt: now, Kind: protocol.KindHTTPAuth,
		Tags: [][]string{{"u", url}, {"method", http.MethodPost}, {"payload", hex.EncodeToString(sum[:])}, {"nonce", strconv.FormatInt(time.Now().UnixNano(), 10)}}}
	if bits > 0 {
		if err := protocol.Mine(ctx, e, bits); err != nil {
			return "", err
		}
	}
	e.Sign(priv)
	return "ANP2 " + base64.StdEncoding.EncodeToString(protocol.AppendJSON(nil, e)), nil
}
