package eventlog

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/anp2net/relay/protocol"
)

// A withheld event's stored body is a tombstone in place of the event
// (SPEC §21.8): the log keeps its seq and its id, which is its
// transparency-log entry, and nothing else of it. Tombstone writes one;
// WithheldOf recognises one.
//
// The tombstone begins with {"id":"<id>", as every stored body does, so
// the tree reads its entry from it like any other.

// ErrWithheld is a backend's answer to a redaction of an event whose
// body it already withholds.
var ErrWithheld = errors.New("event already withheld")

// Withholding says why a stored event's body is withheld.
type Withholding struct {
	// Reason is the operator's reason, as the redaction event states it.
	Reason string `json:"reason"`
	// Redaction is the id of the kind 25 event that records it.
	Redaction string `json:"redaction"`
	// CreatedAt is the withheld event's created_at (its reconciliation
	// item; nothing else of it is kept).
	CreatedAt int64 `json:"created_at"`
}

// tombstoneKey is the member that marks a tombstone: no event has it.
const tombstoneKey = `,"withheld":`

// Tombstone returns the stored body that stands for the withheld event id.
func Tombstone(id string, w Withholding) []byte {
	reason, _ := json.Marshal(w.Reason)
	b := make([]byte, 0, 160+len(reason))
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `"`+tombstoneKey...)
	b = append(b, reason...)
	b = append(b, `,"redaction":"`...)
	b = append(b, w.Redaction...)
	b = append(b, `","created_at":`...)
	b = strconv.AppendInt(b, w.CreatedAt, 10)
	return append(b, '}')
}

// WithheldOf reports whether body is a tombstone and, if so, the withheld
// event's id and why. It looks at a fixed offset first, so an ordinary
// body costs a comparison.
func WithheldOf(body []byte) (id string, w Withholding, ok bool) {
	const head = `{"id":"`
	at := len(head) + 64 + 1
	if len(body) < at+len(tombstoneKey) || string(body[:len(head)]) != head || string(body[at:at+len(tombstoneKey)]) != tombstoneKey {
		return "", w, false
	}
	var t struct {
		ID string `json:"id"`
		Withholding
		Withheld *string `json:"withheld"`
	}
	if json.Unmarshal(body, &t) != nil || t.Withheld == nil || !protocol.IsHex64(t.ID) ||
		t.Redaction != "" && !protocol.IsHex64(t.Redaction) {
		return "", w, false
	}
	t.Withholding.Reason = *t.Withheld
	return t.ID, t.Withholding, true
}

// RedactionKeys checks a Redact call's arguments, as every log does: id is
// a 64-hex event id and tombstone a tombstone naming it. It returns the
// id's 32 bytes and the id the log records as the event's revoker: the
// redaction's (id's own when the tombstone names none).
func RedactionKeys(id string, tombstone []byte) (idb, revoker []byte, err error) {
	idb, err = hex.DecodeString(id)
	if err != nil || len(idb) != 32 {
		return nil, nil, ErrNotFound
	}
	tid, w, ok := WithheldOf(tombstone)
	if !ok || tid != id {
		return nil, nil, fmt.Errorf("redact: the tombstone does not name %s", id)
	}
	revoker = idb
	if b, err := hex.DecodeString(w.Redaction); err == nil && len(b) == 32 {
		revoker = b
	}
	return idb, revoker, nil
}
