package branches

import (
	"encoding/json"
	"regexp"
	"time"

	"github.com/anp2net/relay/protocol"
)

// Checkpoint is the content of a kind 12 event (seed §11.1).
type Checkpoint struct {
	CheckpointID string `json:"checkpoint_id"`
	StateHash    string `json:"state_hash"`
	EventCount   int64  `json:"event_count"`
	AsOf         int64  `json:"as_of"`
}

// Proposal is the content of a kind 13 event (seed §11.2).
type Proposal struct {
	TargetCheckpoint string   `json:"target_checkpoint"`
	Reason           string   `json:"reason"`
	AffectedSample   []string `json:"affected_event_ids_sample,omitempty"`
}

// Ban is the content of a kind 14 event (seed §11.5).
type Ban struct {
	AgentID string `json:"agent_id"`
	Reason  string `json:"reason"`
}

// MaxCheckpointID bounds checkpoint_id and target_checkpoint (bytes).
const MaxCheckpointID = 128

// branchRE is the seed's branch id syntax (§11.3.1).
var branchRE = regexp.MustCompile(`^(main|pre-rollback-[0-9a-f]{8,16}|b-[0-9a-f]{8,16})$`)

// ValidBranchID reports whether id follows §11.3.1.
func ValidBranchID(id string) bool { return branchRE.MatchString(id) }

// ParseCheckpoint returns the checkpoint content of e, or an error with a
// stable code: checkpoint_id 1–128 bytes, state_hash 64 lowercase hex,
// event_count and as_of integers in [0, 2^53−1], as_of ≤ created_at.
func ParseCheckpoint(e *protocol.Event) (Checkpoint, error) {
	var c Checkpoint
	if err := json.Unmarshal([]byte(e.Content), &c); err != nil {
		return c, protocol.Errorf("invalid_checkpoint", "kind 12 content is not a checkpoint object: %v", err)
	}
	switch {
	case c.CheckpointID == "" || len(c.CheckpointID) > MaxCheckpointID:
		return c, protocol.Errorf("invalid_checkpoint", "checkpoint_id must be 1 to %d bytes", MaxCheckpointID)
	case !protocol.IsHex64(c.StateHash):
		return c, protocol.Errorf("invalid_checkpoint", "state_hash must be 64 lowercase hex characters")
	case c.EventCount < 0 || c.EventCount > protocol.MaxSafeInteger || c.AsOf < 0 || c.AsOf > protocol.MaxSafeInteger:
		return c, protocol.Errorf("invalid_checkpoint", "event_count and as_of must be integers in [0, 2^53-1]")
	case c.AsOf > e.CreatedAt:
		return c, protocol.Errorf("invalid_checkpoint", "as_of must not be after the event's created_at")
	}
	return c, nil
}

// ParseProposal returns the rollback proposal content of e, or an error
// with a stable code.
func ParseProposal(e *protocol.Event) (Proposal, error) {
	var p Proposal
	if err := json.Unmarshal([]byte(e.Content), &p); err != nil {
		return p, protocol.Errorf("invalid_rollback", "kind 13 content is not a rollback proposal: %v", err)
	}
	if p.TargetCheckpoint == "" || len(p.TargetCheckpoint) > MaxCheckpointID {
		return p, protocol.Errorf("invalid_rollback", "target_checkpoint must be 1 to %d bytes", MaxCheckpointID)
	}
	return p, nil
}

// ParseBan returns the ban content of e, or an error with a stable code:
// agent_id is 64 lowercase hex, and a p tag may name it instead (§14.x
// ban_agent "tag with p").
func ParseBan(e *protocol.Event) (Ban, error) {
	var b Ban
	if err := json.Unmarshal([]byte(e.Content), &b); err != nil {
		return b, protocol.Errorf("invalid_ban", "kind 14 content is not a ban: %v", err)
	}
	if b.AgentID == "" {
		if ps := e.TagValues("p"); len(ps) == 1 {
			b.AgentID = ps[0]
		}
	}
	if !protocol.IsHex64(b.AgentID) {
		return b, protocol.Errorf("invalid_ban", "agent_id must be 64 lowercase hex characters")
	}
	return b, nil
}

// branchTags returns the distinct well-formed branch tag values of e.
func branchTags(e *protocol.Event) []string {
	var out []string
	for _, v := range e.TagValues("branch") {
		if !ValidBranchID(v) {
			continue
		}
		dup := false
		for _, o := range out {
			dup = dup || o == v
		}
		if !dup {
			out = append(out, v)
		}
	}
	return out
}

// DefaultCheckpointID names a checkpoint at asOf: "cp-" and the UTC time
// as YYYY-MM-DDTHH:MM:SSZ.
func DefaultCheckpointID(asOf int64) string {
	return "cp-" + time.Unix(asOf, 0).UTC().Format("2006-01-02T15:04:05Z")
}

// reasonOf reports a content error as "<code>: <detail>".
func reasonOf(err error) string { return protocol.CodeOf(err) + ": " + err.Error() }
