package ws

import (
	"encoding/json"
	"testing"
)

// FuzzSeedDialect: any /subscribe message either translates to a /ws
// frame (which then parses or fails coded, as on /ws) or fails with a
// coded invalid_frame error; any relay frame translates to one JSON
// object with an action.
func FuzzSeedDialect(f *testing.F) {
	for _, s := range []string{
		`{"action":"sub","id":"w","filter":{"kinds":[1],"t":"weather"}}`, `{"action":"sub","id":"w"}`,
		`{"action":"unsub","id":"w"}`, `{"action":"event","event":{"id":"x"}}`, `{"action":"sub","id":1}`,
		`{"action":"sub"}`, `{"action":"nope"}`, `[]`, `{}`, `{"action":"sub","id":"a"} {}`, `null`,
		`["EVENT","s",{"id":"x"},7]`, `["EOSE","s",3]`, `["CLOSED","s",""]`, `["OK","i",true,""]`, `["NOTICE","m"]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if fr, err := SeedToFrame(b); err != nil {
			coded(t, err, CodeInvalidFrame)
		} else if _, err := ParseFrame(fr); err != nil {
			coded(t, err, CodeInvalidFrame)
		}
		var m map[string]json.RawMessage
		out := FrameToSeed(b)
		if json.Unmarshal(out, &m) != nil || m["action"] == nil {
			t.Fatalf("relay frame %q became %q", b, out)
		}
	})
}
