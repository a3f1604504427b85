package relay

import (
	"fmt"
	"io"

	"github.com/anp2net/relay/relay/state"
)

// writeFolds appends a gauge per derived view of its entries and bytes in
// memory (views that report them, state.Sizer) and, for views with saved
// state, the bytes of their snapshot on disk (disk: view name → bytes).
func writeFolds(w io.Writer, sizes []state.FoldSize, disk map[string]int64, resumed int64) {
	if resumed != noStateDir {
		gauge(w, "anp2_state_resumed_seq", "Log position the derived state resumed from at start (-1: folded the whole log).", float64(resumed))
	}
	fmt.Fprintf(w, "# HELP anp2_fold_entries Records a derived view holds in memory.\n# TYPE anp2_fold_entries gauge\n")
	for _, z := range sizes {
		if z.Sized {
			fmt.Fprintf(w, "anp2_fold_entries{fold=%q} %d\n", z.Name, z.Entries)
		}
	}
	fmt.Fprintf(w, "# HELP anp2_fold_bytes Estimated bytes of a derived view, in memory (heap) or on disk (its saved snapshot).\n# TYPE anp2_fold_bytes gauge\n")
	for _, z := range sizes {
		if z.Sized {
			fmt.Fprintf(w, "anp2_fold_bytes{fold=%q,where=\"memory\"} %d\n", z.Name, z.Bytes)
		}
		if b, ok := disk[z.Name]; ok {
			fmt.Fprintf(w, "anp2_fold_bytes{fold=%q,where=\"disk\"} %d\n", z.Name, b)
		}
	}
}

// noStateDir is writeFolds' resumed figure for a relay without saved state.
const noStateDir = -2
