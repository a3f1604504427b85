package delivery

import (
	"bytes"
	"encoding/json"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxDocBytes caps a PAP document (a trigger or an agent manifest) as
// POST /triggers and POST /manifests take it (SPEC §16).
const MaxDocBytes = 64 << 10

// Bounds of a YAML document's tree, checked before it is decoded: no
// anchors or aliases (an alias can make a small document decode into a
// huge one), at most maxDocNodes nodes and maxDocDepth levels.
const (
	maxDocNodes = 4096
	maxDocDepth = 32
)

// PAPVersion is the PAP version the relay takes (seed 002).
const PAPVersion = "0.2"

// docJSON turns a document body into JSON: a JSON body as it is (JSON
// is also YAML, but its own decoder keeps numbers exact), a YAML one
// decoded under the bounds above and encoded as JSON. The YAML decoder
// is go.yaml.in/yaml/v3, the YAML organisation's maintained
// continuation of gopkg.in/yaml.v3.
func docJSON(body []byte) ([]byte, error) {
	if len(body) > MaxDocBytes {
		return nil, bad("a document is at most %d bytes", MaxDocBytes)
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		return trimmed, nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(body, &root); err != nil {
		return nil, bad("document: %s", clipYAMLErr(err))
	}
	nodes := 0
	if err := walkYAML(&root, 0, &nodes); err != nil {
		return nil, err
	}
	var v any
	if err := root.Decode(&v); err != nil {
		return nil, bad("document: %s", clipYAMLErr(err))
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, bad("document: not representable as JSON (%v)", err)
	}
	return out, nil
}

// walkYAML checks the bounds of a YAML tree.
func walkYAML(n *yaml.Node, depth int, nodes *int) error {
	*nodes++
	if *nodes > maxDocNodes || depth > maxDocDepth {
		return bad("document: more than %d nodes or %d levels", maxDocNodes, maxDocDepth)
	}
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return bad("document: YAML anchors and aliases are not accepted")
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				return bad("document: mapping keys are plain scalars")
			}
		}
	}
	for _, c := range n.Content {
		if err := walkYAML(c, depth+1, nodes); err != nil {
			return err
		}
	}
	return nil
}

func clipYAMLErr(err error) string {
	s := strings.TrimPrefix(err.Error(), "yaml: ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// strictDecode decodes JSON into v refusing unknown members and trailing
// data.
func strictDecode(js []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bad("%s: %v", what, err)
	}
	if dec.More() {
		return bad("%s: trailing data", what)
	}
	return nil
}

// papTriggerDoc is seed 002 §4's trigger document.
type papTriggerDoc struct {
	PAPVersion string `json:"pap_version"`
	Trigger    *struct {
		ID               string    `json:"id"`
		Description      string    `json:"description"`
		Enabled          *bool     `json:"enabled"`
		Match            Match     `json:"match"`
		Filter           []Guard   `json:"filter"`
		Throttle         *Throttle `json:"throttle"`
		DeduplicationKey string    `json:"deduplication_key"`
		Agent            string    `json:"agent"`
		Target           *Target   `json:"target"`
	} `json:"trigger"`
}

// isDoc reports whether js (a JSON object) is a PAP document: it has a
// pap_version member.
func isDoc(js []byte) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(js, &probe) != nil {
		return false
	}
	_, ok := probe["pap_version"]
	return ok
}

// ParseTrigger decodes a POST /triggers body: the relay's trigger spec
// (JSON), or a PAP trigger document (seed 002 §4, YAML or JSON). It
// returns the spec and whether the trigger is enabled (a document's
// enabled: false registers it paused). Errors are invalid_trigger (or
// webhook_target_refused).
func ParseTrigger(body []byte, allowHTTP bool) (*Spec, bool, error) {
	js, err := docJSON(body)
	if err != nil {
		return nil, false, err
	}
	if !isDoc(js) {
		s, err := ParseSpec(js, allowHTTP)
		return s, true, err
	}
	var d papTriggerDoc
	if err := strictDecode(js, &d, "PAP trigger document"); err != nil {
		return nil, false, err
	}
	if d.PAPVersion != PAPVersion {
		return nil, false, bad("pap_version must be %q", PAPVersion)
	}
	tr := d.Trigger
	if tr == nil {
		return nil, false, bad("a PAP trigger document has a trigger")
	}
	if !validName(tr.ID) {
		return nil, false, bad("trigger.id %q: 1-128 bytes of letters, digits and . _ -", clip(tr.ID))
	}
	s := &Spec{Name: tr.ID, Description: tr.Description, Match: tr.Match, Filter: tr.Filter, Throttle: tr.Throttle,
		DeduplicationKey: tr.DeduplicationKey, Agent: tr.Agent, Target: tr.Target}
	if err := s.check(allowHTTP); err != nil {
		return nil, false, err
	}
	return s, tr.Enabled == nil || *tr.Enabled, nil
}
