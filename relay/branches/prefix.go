package branches

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/state"
)

// Snapshot is the content of a checkpoint at as_of as one relay derives
// it (SPEC §17.1): the state.v1 digest, evaluated at as_of, of the
// events created at or before as_of, and their number. A revocation
// created after as_of does not apply to it.
type Snapshot struct {
	StateHash  string `json:"state_hash"`
	EventCount int64  `json:"event_count"`
	AsOf       int64  `json:"as_of"`
}

// Prefix folds the events created at or before asOf, given by each, into
// a fresh state built with opts, and returns its Snapshot. each calls its
// argument for every stored event, in any order, and returns its error.
func Prefix(asOf int64, opts state.Options, each func(func(*protocol.Event) error) error) (Snapshot, error) {
	var evs []*protocol.Event
	err := each(func(e *protocol.Event) error {
		if e.CreatedAt <= asOf && e.Kind != protocol.KindHealth {
			evs = append(evs, e)
		}
		return nil
	})
	if err != nil {
		return Snapshot{}, err
	}
	d := fold(evs, opts).Digest(asOf)
	return Snapshot{StateHash: d.Digest, EventCount: int64(len(evs)), AsOf: asOf}, nil
}

// LogEvents iterates a relay's log for Prefix.
func LogEvents(ctx context.Context, log eventlog.Log) func(func(*protocol.Event) error) error {
	return func(fn func(*protocol.Event) error) error {
		return log.Export(ctx, 0, func(int64) error { return nil }, func(seq int64, body []byte) error {
			if _, _, withheld := eventlog.WithheldOf(body); withheld {
				return nil // a tombstone is in no view (SPEC §21.8)
			}
			e, err := protocol.DecodeJSON(body)
			if err != nil {
				return fmt.Errorf("event at seq %d: %w", seq, err)
			}
			return fn(e)
		})
	}
}

// Content returns the kind 12 content for s under checkpointID, in the
// JSON form `anp2 cosign` and `anp2 publish` take.
func (s Snapshot) Content(checkpointID string) string {
	b, _ := json.Marshal(Checkpoint{CheckpointID: checkpointID, StateHash: s.StateHash, EventCount: s.EventCount, AsOf: s.AsOf})
	return string(b)
}
