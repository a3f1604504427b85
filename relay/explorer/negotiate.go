package explorer

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// WantsHTML reports whether an Accept header asks for HTML before JSON:
// text/html (or application/xhtml+xml) is listed explicitly with a
// quality above zero and at least that of application/json. Wildcards
// never choose HTML, so `*/*` (curl, most HTTP libraries) and an absent
// header keep the JSON answer; a browser's navigation header
// (`text/html,application/xhtml+xml,…,*/*;q=0.8`) gets the explorer.
// Malformed parts are ignored.
func WantsHTML(accept string) bool {
	html, json := -1.0, -1.0
	for part := range strings.SplitSeq(accept, ",") {
		typ, q := mediaRange(part)
		switch typ {
		case "text/html", "application/xhtml+xml":
			html = max(html, q)
		case "application/json":
			json = max(json, q)
		}
	}
	return html > 0 && html >= json
}

// mediaRange returns the lowercased type of one Accept element and its
// quality (1 when absent, -1 when malformed).
func mediaRange(part string) (string, float64) {
	fields := strings.Split(part, ";")
	typ := strings.ToLower(strings.TrimSpace(fields[0]))
	q := 1.0
	for _, p := range fields[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 || f > 1 || f != f {
			return typ, -1
		}
		q = f
	}
	return typ, q
}

// sortHidden orders hidden events most recently hidden first, then by id.
func sortHidden(h []hiddenEvent) {
	slices.SortFunc(h, func(a, b hiddenEvent) int {
		if c := cmp.Compare(b.HiddenSince, a.HiddenSince); c != 0 {
			return c
		}
		return strings.Compare(a.EventID, b.EventID)
	})
}
