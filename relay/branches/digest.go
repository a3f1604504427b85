package branches

import (
	"crypto/sha256"
	"encoding/json"

	"github.com/gowebpki/jcs"
)

// Digest hashes the view at at (state.Digester): SHA-256 over the JCS
// form of {"version": "branches.v1", "checkpoints", "rollbacks",
// "branches", "bans"}, each entry reduced to what the rules decide (ids,
// validity, counted endorsers, weights to 6 decimals, states, activation
// times). It depends only on the events folded in and at.
func (f *Fold) Digest(at int64) [32]byte {
	return DigestOf(f.Evaluate(at))
}

// DigestOf hashes a view as Digest does.
func DigestOf(v View) [32]byte {
	type cp struct {
		ID       string `json:"id"`
		Valid    bool   `json:"valid"`
		Endorsed int    `json:"endorsed"`
	}
	type rb struct {
		ID          string  `json:"id"`
		Events      int     `json:"events"`
		State       string  `json:"state"`
		Weight      float64 `json:"weight"`
		Total       float64 `json:"total"`
		ActivatedAt int64   `json:"activated_at"`
	}
	type ban struct {
		ID      string `json:"id"`
		AgentID string `json:"agent_id"`
		Valid   bool   `json:"valid"`
	}
	d := struct {
		Version     string   `json:"version"`
		At          int64    `json:"at"`
		Checkpoints []cp     `json:"checkpoints"`
		Rollbacks   []rb     `json:"rollbacks"`
		Branches    []Branch `json:"branches"`
		Bans        []ban    `json:"bans"`
	}{Version: "branches.v1", At: v.At, Checkpoints: []cp{}, Rollbacks: []rb{}, Branches: v.Branches, Bans: []ban{}}
	for _, c := range v.Checkpoints {
		d.Checkpoints = append(d.Checkpoints, cp{c.ID, c.Valid, c.Endorsed})
	}
	for _, r := range v.Rollbacks {
		d.Rollbacks = append(d.Rollbacks, rb{r.ID, len(r.Events), r.State, r.Weight, r.TotalWeight, r.ActivatedAt})
	}
	for _, b := range v.Bans {
		d.Bans = append(d.Bans, ban{b.ID, b.AgentID, b.Valid})
	}
	raw, _ := json.Marshal(d)
	canon, _ := jcs.Transform(raw)
	return sha256.Sum256(canon)
}
