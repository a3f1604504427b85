package logtest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// Redactor is a log that can withhold an event's body (SPEC §21.8).
type Redactor interface {
	eventlog.Log
	Redact(ctx context.Context, id string, tombstone []byte) error
}

// RedactContent is the content of the event CheckRedact withholds: a
// backend's test may look for it in its files afterwards.
const RedactContent = "withhold me: court order"

// CheckRedact stores a few events, withholds one and checks every read of
// the log: Get gives the tombstone, a second copy is still a duplicate,
// no query (by tag, kind, author, as_of, with the caller or the log
// judging revocations) nor History returns it, Export keeps its seq with
// the tombstone, and the others are untouched. reopen, when set, closes
// the log and opens it again, and the reads are checked once more.
func CheckRedact(t *testing.T, l Redactor, reopen func() Redactor) {
	t.Helper()
	ctx := context.Background()
	a, b := Key(301), Key(302)
	gone := Ev(a, 1_780_000_100, 1, RedactContent, []string{"t", "redact"}, []string{"p", protocol.AgentIDOf(b)})
	kept := Ev(a, 1_780_000_101, 1, "kept", []string{"t", "redact"})
	other := Ev(b, 1_780_000_102, 1, "other")
	AppendAll(t, l, gone, kept, other)
	tomb := eventlog.Tombstone(gone.ID, eventlog.Withholding{Reason: "court order", Redaction: other.ID, CreatedAt: gone.CreatedAt})
	if err := l.Redact(ctx, gone.ID, tomb); err != nil {
		t.Fatalf("Redact: %v", err)
	}
	if err := l.Redact(ctx, gone.ID, tomb); err == nil {
		t.Fatal("a second Redact of the same event succeeded")
	}
	missing := strings.Repeat("0", 64)
	if err := l.Redact(ctx, missing, eventlog.Tombstone(missing, eventlog.Withholding{})); !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("Redact of an unknown id: %v", err)
	}
	checkRedacted(t, l, gone, kept, tomb)
	if reopen != nil {
		checkRedacted(t, reopen(), gone, kept, tomb)
	}
}

func checkRedacted(t *testing.T, l eventlog.Log, gone, kept *protocol.Event, tomb []byte) {
	t.Helper()
	ctx := context.Background()
	st, err := l.Get(ctx, gone.ID)
	if err != nil || !bytes.Equal(st.Body, tomb) {
		t.Fatalf("Get of the withheld event: %v %s", err, st.Body)
	}
	if res, err := l.Append(ctx, eventlog.Record{Event: gone}); err != nil || !res.Duplicate {
		t.Fatalf("a copy of the withheld event: %+v %v", res, err)
	}
	asOf := int64(1_780_000_200)
	never := func(string) bool { return false }
	for _, f := range []eventlog.Filter{
		{}, {Tags: map[string][]string{"t": {"redact"}}}, {Kinds: []int64{1}}, {Authors: []string{gone.AgentID}},
		{AsOf: &asOf}, {Tags: map[string][]string{"p": {protocol.AgentIDOf(Key(302))}}},
		{Tags: map[string][]string{"t": {"redact"}}, Revoked: never}, {Kinds: []int64{1}, Revoked: never},
		{Authors: []string{gone.AgentID}, Revoked: never}, {IDs: []string{kept.ID}, Revoked: never},
	} {
		bodies, err := l.Query(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		got := IDs(t, bodies)
		if slices.Contains(got, gone.ID) {
			t.Fatalf("Query %+v returns the withheld event", f)
		}
		if len(f.IDs) > 0 && !slices.Contains(got, kept.ID) {
			t.Fatalf("Query %+v lost the kept event: %v", f, got)
		}
	}
	hist, err := l.History(ctx, gone.AgentID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := IDs(t, hist); slices.Contains(got, gone.ID) || !slices.Contains(got, kept.ID) {
		t.Fatalf("History: %v", got)
	}
	var seqs []int64
	var bodies [][]byte
	err = l.Export(ctx, 0, func(int64) error { return nil }, func(seq int64, body []byte) error {
		seqs, bodies = append(seqs, seq), append(bodies, bytes.Clone(body))
		return nil
	})
	if err != nil || len(seqs) != 3 || seqs[0] != 1 || seqs[2] != 3 || !bytes.Equal(bodies[0], tomb) {
		t.Fatalf("Export: %v %v %q", err, seqs, bodies)
	}
}

// TombstoneAppender is a Redactor that can also store a withheld event's
// tombstone as its next event (anp2 migrate).
type TombstoneAppender interface {
	Redactor
	AppendTombstone(ctx context.Context, tombstone []byte, receivedAt int64) (int64, error)
}

// CheckAppendTombstone stores a tombstone between two events: it takes
// the next seq, its event is then a duplicate, no query returns it, a
// second copy is refused, and Export gives it at its seq.
func CheckAppendTombstone(t *testing.T, l TombstoneAppender) {
	t.Helper()
	ctx := context.Background()
	a := Key(303)
	first := Ev(a, 1_780_000_300, 1, "first", []string{"t", "tomb"})
	gone := Ev(a, 1_780_000_301, 1, RedactContent, []string{"t", "tomb"})
	last := Ev(a, 1_780_000_302, 1, "last", []string{"t", "tomb"})
	AppendAll(t, l, first)
	tomb := eventlog.Tombstone(gone.ID, eventlog.Withholding{Reason: "copied", Redaction: first.ID, CreatedAt: gone.CreatedAt})
	if seq, err := l.AppendTombstone(ctx, tomb, 5); err != nil || seq != 2 {
		t.Fatalf("AppendTombstone = %d, %v", seq, err)
	}
	if _, err := l.AppendTombstone(ctx, tomb, 5); err == nil {
		t.Fatal("a second copy of the tombstone was stored")
	}
	if res, err := l.Append(ctx, eventlog.Record{Event: last}); err != nil || res.Seq != 3 {
		t.Fatalf("the next append: %+v %v", res, err)
	}
	if res, err := l.Append(ctx, eventlog.Record{Event: gone}); err != nil || !res.Duplicate {
		t.Fatalf("the withheld event after its tombstone: %+v %v", res, err)
	}
	for _, f := range []eventlog.Filter{{}, {Tags: map[string][]string{"t": {"tomb"}}}, {Kinds: []int64{1}, Revoked: func(string) bool { return false }}} {
		bodies, err := l.Query(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if got := IDs(t, bodies); slices.Contains(got, gone.ID) || !slices.Contains(got, last.ID) {
			t.Fatalf("Query %+v: %v", f, got)
		}
	}
	var bodies [][]byte
	err := l.Export(ctx, 0, func(int64) error { return nil }, func(seq int64, body []byte) error {
		bodies = append(bodies, bytes.Clone(body))
		return nil
	})
	if err != nil || len(bodies) != 3 || !bytes.Equal(bodies[1], tomb) {
		t.Fatalf("Export: %v %q", err, bodies)
	}
}
