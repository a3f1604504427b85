package tasks

import (
	"crypto/sha256"
	"encoding/json"
	"sort"

	"github.com/gowebpki/jcs"
)

// DigestVersion names the canonical serialization Digest hashes.
const DigestVersion = "tasks.v1"

// digestDoc is the document Digest hashes: every task's view without the
// request's own reward and constraints objects (inputs, not derived state),
// sorted by task_id. Floats are rounded to 1e-6 where they are computed.
type digestDoc struct {
	Now     int64      `json:"now"`
	Tasks   []TaskView `json:"tasks"`
	Version string     `json:"version"`
}

// Digest returns SHA-256 over the RFC 8785 (JCS) serialization of
// {"now": now, "tasks": [every TaskView at now without reward and
// constraints, by task_id], "version": "tasks.v1"}, under the weight
// function given to New. Two folds holding the same set of events give the
// same digest.
func (f *Fold) Digest(now int64) [32]byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	byID := append([]*task(nil), f.order...)
	sort.Slice(byID, func(i, j int) bool { return string(byID[i].id[:]) < string(byID[j].id[:]) })
	h := sha256.New()
	c := &canon{b: make([]byte, 0, 4096)}
	c.b = append(c.b, `{"now":`...)
	c.int(now)
	c.b = append(c.b, `,"tasks":[`...)
	for i, t := range byID {
		if i > 0 {
			c.b = append(c.b, ',')
		}
		v := f.view(t, now, f.weight)
		c.taskView(&v)
		h.Write(c.b)
		c.b = c.b[:0]
	}
	c.b = append(c.b, `],"version":`...)
	c.str(DigestVersion)
	c.b = append(c.b, '}')
	h.Write(c.b)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// CanonicalDigest returns SHA-256 of the JCS form of v's JSON encoding. v
// must hold only finite numbers; should encoding fail anyway, the digest is
// taken over the plain JSON bytes (still deterministic).
func CanonicalDigest(v any) [32]byte {
	b, err := json.Marshal(v)
	if err != nil {
		return sha256.Sum256([]byte(err.Error()))
	}
	if c, err := jcs.Transform(b); err == nil {
		b = c
	}
	return sha256.Sum256(b)
}
