package trust

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// canonicalDigest returns SHA-256 over the RFC 8785 (JCS) form of v's JSON.
// Every float in v is already rounded to 6 decimals and every list sorted.
// It panics only on a programming error (a value JSON cannot hold).
func canonicalDigest(v any) [32]byte {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("trust: marshal digest document: %v", err))
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		panic(fmt.Sprintf("trust: canonicalize digest document: %v", err))
	}
	return sha256.Sum256(canon)
}

// digestVote is one latest vote in the trust digest document.
type digestVote struct {
	From      string  `json:"from"`
	To        string  `json:"to"`
	Score     float64 `json:"score"`
	CreatedAt int64   `json:"created_at"`
	EventID   string  `json:"event_id"`
}

// trustDocument is the canonical state of the trust view: every agent's
// summary (agent id order) and every latest vote per pair, withdrawals
// included (target id order, then as in AgentTrust.Votes).
type trustDocument struct {
	View       string       `json:"view"`
	Now        int64        `json:"now"`
	Iterations int          `json:"iterations"`
	Converged  bool         `json:"converged"`
	Agents     []Summary    `json:"agents"`
	Votes      []digestVote `json:"votes"`
}

// document returns the canonical trust state the digest is computed over.
func (s *Snapshot) document() trustDocument {
	doc := trustDocument{View: Algorithm, Now: s.Now, Iterations: s.Iterations, Converged: s.Converged,
		Agents: s.sum, Votes: make([]digestVote, 0, len(s.votes))}
	if doc.Agents == nil {
		doc.Agents = []Summary{}
	}
	for t := range s.sum {
		for _, v := range s.votes[s.vstart[t]:s.vstart[t+1]] {
			doc.Votes = append(doc.Votes, digestVote{From: v.From, To: s.sum[t].AgentID,
				Score: round6(v.Score), CreatedAt: v.CreatedAt, EventID: v.EventID})
		}
	}
	return doc
}

// Digest returns SHA-256 over the canonical serialization of the snapshot.
func (s *Snapshot) Digest() [32]byte { return canonicalDigest(s.document()) }

// Digest returns SHA-256 over the canonical serialization of the trust state
// at EvalTime(now), exact for the current version (At).
func (g *Graph) Digest(now int64) [32]byte { return g.At(now).Digest() }
