package relay

import (
	"fmt"
	"io"

	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/reconcile"
)

// writeLogIndexes appends the log's in-memory indexes (the ids and
// authors of a log that keeps them, eventlog.IndexSizer, and the
// reconciliation index of every stored event) to w: entries and
// estimated heap each, the size of the log's index file, and where the
// log's indexes were loaded from at start.
func writeLogIndexes(w io.Writer, log eventlog.Log, index *reconcile.Index) {
	sizes := []eventlog.IndexSize{{Name: "reconcile", Entries: int64(index.Len()), Bytes: index.Bytes()}}
	rep := eventlog.IndexReport{FileBytes: -1, LoadedFrom: -1}
	if z, ok := log.(eventlog.IndexSizer); ok {
		rep = z.IndexReport()
		sizes = append(rep.Indexes, sizes...)
	}
	fmt.Fprintf(w, "# HELP anp2_log_index_entries Events each in-memory index of the log holds.\n# TYPE anp2_log_index_entries gauge\n")
	for _, z := range sizes {
		fmt.Fprintf(w, "anp2_log_index_entries{index=%q} %d\n", z.Name, z.Entries)
	}
	fmt.Fprintf(w, "# HELP anp2_log_index_bytes Estimated heap of each in-memory index of the log.\n# TYPE anp2_log_index_bytes gauge\n")
	for _, z := range sizes {
		fmt.Fprintf(w, "anp2_log_index_bytes{index=%q} %d\n", z.Name, z.Bytes)
	}
	if rep.FileBytes >= 0 {
		gauge(w, "anp2_log_index_file_bytes", "Size of the log's index file (<db>.idx), the id and author indexes saved.", float64(rep.FileBytes))
	}
	if rep.LoadedFrom >= 0 {
		gauge(w, "anp2_log_index_loaded_from_seq", "Log position the log's indexes were loaded from at start (0: the whole log was read).", float64(rep.LoadedFrom))
		gauge(w, "anp2_log_index_rows_read", "Events read from the log at start to fill the log's indexes (those after the index file's position).", float64(rep.RowsRead))
	}
}
