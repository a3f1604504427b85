package discovery_test

import (
	"strings"
	"testing"
)

// TestUnknownSubjects: every route answers an agent or event it has never
// seen with an empty 200, never an error.
func TestUnknownSubjects(t *testing.T) {
	r, _ := start(t)
	id := strings.Repeat("ab", 32)
	for _, path := range []string{
		"/beacons", "/feed/" + id, "/recommendations/" + id, "/copresence/" + id, "/neighbors/" + id,
		"/neighbors/" + id + "?method=co-occurrence", "/citations/" + id, "/agents/" + id + "/subscriptions",
		"/agents/" + id + "/followers", "/subscriptions/" + id, "/topics/%E2%9C%93%20x/followers",
	} {
		var out map[string]any
		get(t, r, path, &out)
		if n, ok := out["count"].(float64); !ok || n != 0 {
			t.Fatalf("%s: %v", path, out)
		}
	}
}
