package main

import (
	"bytes"
	"fmt"
	"io"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// withheldEntries collects, while an audit walks the entries, the
// entries whose body the relay withholds (their /export line is a
// tombstone, SPEC §21.8) and the redactions (kind 25, signature checked)
// the log holds, so that each withheld entry is reported with the
// redaction that explains it. A withheld entry is not a broken log; one
// that no signed redaction in the audited entries names is.
type withheldEntries struct {
	list []withheldEntry
	// redactions maps a verified kind 25's id to its author and targets.
	redactions map[string]redactionSeen
}

type withheldEntry struct {
	index int64
	id    string
	w     eventlog.Withholding
}

type redactionSeen struct {
	author  string
	targets map[string]bool
}

// note looks at the event of the entry at index.
func (x *withheldEntries) note(index int64, ev []byte) {
	if id, w, ok := eventlog.WithheldOf(ev); ok {
		x.list = append(x.list, withheldEntry{index, id, w})
		return
	}
	if len(ev) < 128 || !redactionKind(ev) {
		return
	}
	e, err := protocol.DecodeJSON(ev)
	if err != nil || e.Kind != protocol.KindRedaction || e.CheckID() != nil || e.CheckSig() != nil {
		return
	}
	if x.redactions == nil {
		x.redactions = map[string]redactionSeen{}
	}
	r := redactionSeen{author: e.AgentID, targets: map[string]bool{}}
	for _, t := range e.TagValues("e") {
		r.targets[t] = true
	}
	x.redactions[e.ID] = r
}

// redactionKind is a cheap test that a stored body (protocol.AppendJSON:
// kind follows created_at) may be a kind 25.
func redactionKind(ev []byte) bool { return bytes.Contains(ev, []byte(`,"kind":25,"tags":`)) }

// report prints each withheld entry and fails when one is not named by a
// signed redaction among the audited entries.
func (x *withheldEntries) report(out io.Writer) error {
	unexplained := 0
	for _, e := range x.list {
		r, ok := x.redactions[e.w.Redaction]
		if !ok || !r.targets[e.id] {
			unexplained++
			fmt.Fprintf(out, "WITHHELD WITHOUT A REDACTION: entry %d (%s): no signed kind 25 among the audited entries names it (the tombstone cites %q)\n", e.index, e.id, e.w.Redaction)
			continue
		}
		fmt.Fprintf(out, "withheld: entry %d (%s): %q, redaction %s signed by %s\n", e.index, e.id, e.w.Reason, e.w.Redaction, r.author)
	}
	if len(x.list) > 0 {
		fmt.Fprintf(out, "%d entries withheld (their bodies removed by the operator; the entries and the tree are intact)\n", len(x.list))
	}
	if unexplained > 0 {
		return failf("%d withheld entries are named by no signed redaction", unexplained)
	}
	return nil
}
