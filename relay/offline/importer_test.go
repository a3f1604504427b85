package offline

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/relay/state/statetest"
)

// TestImportSwitchesToBulk imports the same lines twice, once small enough
// to stay out of bulk mode and once with the bulk threshold lowered, and
// requires the two logs to answer every filter alike.
func TestImportSwitchesToBulk(t *testing.T) {
	evs := statetest.Corpus(5, 16, 20, corpusBase, 700)
	var lines bytes.Buffer
	for _, e := range evs {
		lines.Write(protocol.AppendJSON(nil, e))
		lines.WriteByte('\n')
	}
	load := func(name string, min int) (*sqlite.Store, []string) {
		defer func(n int) { bulkMin = n }(bulkMin)
		bulkMin = min
		st, err := sqlite.Open(filepath.Join(t.TempDir(), name+".db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		var phases []string
		im := &Importer{Store: st, Checker: protocol.DefaultChecker(), Now: vectorTime, OnPhase: func(p string) { phases = append(phases, p) }}
		im.Checker.PoW.Kinds = nil
		res, err := im.Import(context.Background(), bytes.NewReader(lines.Bytes()))
		if err != nil || res.Accepted != len(evs) {
			t.Fatalf("%s: %+v %v", name, res, err)
		}
		return st, phases
	}
	plain, phases := load("plain", 1<<30)
	if len(phases) != 0 {
		t.Fatalf("a small import went bulk: %v", phases)
	}
	bulk, phases := load("bulk", 100)
	if len(phases) < 2 || phases[0] != "bulk load" || bulk.Bulk() {
		t.Fatalf("phases %v", phases)
	}
	filters := []eventlog.Filter{{Limit: 1000}, {Kinds: []int64{6}, Limit: 1000}}
	for _, e := range evs[:40] {
		filters = append(filters, eventlog.Filter{Authors: []string{e.AgentID}, Limit: 1000})
		for _, tag := range e.Tags {
			if len(tag) >= 2 {
				filters = append(filters, eventlog.Filter{Tags: map[string][]string{tag[0]: {tag[1]}}, Kinds: []int64{e.Kind}, Limit: 1000})
			}
		}
	}
	for _, f := range filters {
		x, err1 := plain.Query(context.Background(), f)
		y, err2 := bulk.Query(context.Background(), f)
		if err1 != nil || err2 != nil || len(x) == 0 || !bytes.Equal(bytes.Join(x, nil), bytes.Join(y, nil)) {
			t.Fatalf("%+v: %d vs %d events (%v %v)", f, len(x), len(y), err1, err2)
		}
	}
}
