package state

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strconv"

	"github.com/anp2net/relay/trust"
)

// Version names the state digest's construction.
const Version = "state.v1"

// Digest is the body of GET /state: what the views hold and their digests
// at one evaluation time.
type Digest struct {
	// Seq is the highest log sequence folded in (relay-local).
	Seq int64 `json:"seq"`
	// Events counts the stored events, revoked ones included; Revoked
	// counts those a revocation excludes from the views.
	Events  int64 `json:"events"`
	Revoked int   `json:"revoked"`
	// At is the evaluation time, trust.EvalTime of the requested time.
	At int64 `json:"at"`
	// Digest is SHA-256 over the canonical JSON of {"at", "version",
	// "views"}; Views holds each view's digest in hex.
	Digest  string            `json:"digest"`
	Version string            `json:"version"`
	Views   map[string]string `json:"views"`
}

// ViewNames lists the built-in digested views in canonical order; a
// registered fold that is a Digester adds its module's name (Options.Folds).
var ViewNames = []string{"credit", "events", "moderation", "tasks", "trust"}

// Digest computes every view's digest at trust.EvalTime(now). Writers wait
// while it runs, so the result describes one consistent set of events.
func (s *State) Digest(now int64) Digest {
	at := trust.EvalTime(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.digestMu.Lock()
	defer s.digestMu.Unlock()
	s.weights = s.Trust.At(at)
	mod := s.Moderation.ComputeWith(s.weights)
	s.verifier = trust.VerifierWeight(s.weights, mod)
	w := s.verifier
	d := Digest{Seq: s.seq, Events: s.count, Revoked: len(s.revoked), At: at, Version: Version}
	views := map[string][32]byte{
		"events":     s.setDigest(),
		"trust":      s.Trust.Digest(at),
		"moderation": mod.Digest(),
		"tasks":      s.Tasks.Digest(at),
		"credit":     s.Credit.Digest(at, w),
	}
	for _, f := range s.folds {
		if dg, ok := f.Fold.(Digester); ok {
			views[f.Name] = dg.Digest(at)
		}
	}
	d.Views = make(map[string]string, len(views))
	for k, v := range views {
		d.Views[k] = hex.EncodeToString(v[:])
	}
	d.Digest = combine(at, d.Views)
	return d
}

// setDigest is SHA-256 of "anp2-set.v1", the event count as 8 bytes
// big-endian and the id sum as 32 bytes little-endian. Callers hold mu.
func (s *State) setDigest() [32]byte {
	var b [11 + 8 + 32]byte
	copy(b[:], "anp2-set.v1")
	binary.BigEndian.PutUint64(b[11:], uint64(s.count))
	for i := 0; i < 4; i++ {
		binary.LittleEndian.PutUint64(b[19+8*i:], s.sum[i])
	}
	return sha256.Sum256(b[:])
}

// combine hashes the JCS form of {"at":at,"version":Version,"views":{...}}.
// Every key and value is plain ASCII, so the canonical form is written
// directly.
func combine(at int64, views map[string]string) string {
	b := []byte(`{"at":`)
	b = strconv.AppendInt(b, at, 10)
	b = append(b, `,"version":"`+Version+`","views":{`...)
	for i, k := range viewKeys(views) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, k...)
		b = append(b, `":"`...)
		b = append(b, views[k]...)
		b = append(b, '"')
	}
	b = append(b, "}}"...)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// FirstDifference returns the first view, in canonical order, whose digest
// differs between a and b, or "" when all agree.
func FirstDifference(a, b Digest) string {
	keys := viewKeys(a.Views)
	for k := range b.Views {
		if _, ok := a.Views[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if a.Views[k] != b.Views[k] {
			return k
		}
	}
	return ""
}

// viewKeys returns the view names in canonical (JCS: bytewise, the names
// being ASCII) order; with only the built-in views that is ViewNames.
func viewKeys(views map[string]string) []string {
	keys := make([]string, 0, len(views))
	for k := range views {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
