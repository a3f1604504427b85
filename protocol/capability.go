package protocol

import (
	"encoding/json"
	"slices"
)

// CapabilityNames returns the capability names a kind 4 declares: its cap
// tags, else the names in its content's capabilities list; sorted and
// distinct, nil for a nil event.
func CapabilityNames(e *Event) []string {
	if e == nil {
		return nil
	}
	names := slices.Clone(e.TagValues("cap"))
	if len(names) == 0 {
		var body struct {
			Capabilities []struct {
				Name string `json:"name"`
			} `json:"capabilities"`
		}
		json.Unmarshal([]byte(e.Content), &body)
		for _, c := range body.Capabilities {
			if c.Name != "" {
				names = append(names, c.Name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
