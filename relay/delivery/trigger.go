// Package delivery is the relay's push capability (SPEC §16): agents
// register triggers (relay-local rules: a match on kinds, authors and tags,
// PAP guard filters on the content's JSON, a throttle, a webhook or A2A
// agent target),
// and every matching event becomes a delivery in a durable queue that
// follows seed 000's state machine with a fenced owner lease, a watchdog,
// retries with backoff and dead letters.
package delivery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"

	"github.com/anp2net/relay/protocol"
)

// Stable error codes of this package (400 unless noted).
const (
	CodeInvalidTrigger  = "invalid_trigger"
	CodeTooManyTriggers = "too_many_triggers" // 429
	CodeTriggerNotFound = "trigger_not_found" // 404
	CodeTargetRefused   = "webhook_target_refused"
	// CodeCascadeTooDeep: a publish whose triggered_by chain reaches
	// MaxCascadeDepth (400).
	CodeCascadeTooDeep = "cascade_too_deep"
)

// Limits on one trigger.
const (
	maxListValues = 100
	maxGuards     = 16
	maxPathSegs   = 16
	maxRegex      = 256
	maxValueBytes = 4096
	maxURL        = 2048
)

// Spec is a trigger as its owner registers it (the POST /triggers body).
type Spec struct {
	// Name and Description are a PAP document's trigger.id and
	// description (SPEC §16, PAP trigger documents).
	Name        string    `json:"name,omitempty"`
	Description string    `json:"description,omitempty"`
	Match       Match     `json:"match"`
	Filter      []Guard   `json:"filter,omitempty"`
	Throttle    *Throttle `json:"throttle,omitempty"`
	// DeduplicationKey is where an event's deduplication key is read (a
	// content path "$.a.b", or "#name": the event's first tag of that
	// name): a match whose key equals that of a delivery of this trigger
	// not yet delivered replaces it (seed 000 §7, SPEC §16).
	DeduplicationKey string `json:"deduplication_key,omitempty"`
	// Target is where deliveries go, unless Agent names one of the
	// owner's agent manifests, whose target they then take.
	Target *Target `json:"target,omitempty"`
	Agent  string  `json:"agent,omitempty"`

	dedupSegs []string
	dedupTag  string
}

// Match selects events by kind, author and tags (each set list is an OR
// of values; the lists are ANDed; Tags maps a tag name to values).
type Match struct {
	// Type is a PAP event type (SPEC §16): "anp2.kind.<n>" matches kind
	// n, any other an event with a "t" or "s" tag of that value.
	Type    string              `json:"type,omitempty"`
	Kinds   []int64             `json:"kinds,omitempty"`
	Authors []string            `json:"authors,omitempty"`
	Tags    map[string][]string `json:"tags,omitempty"`
}

// Guard is one PAP filter on the content's JSON: path, operator, value.
type Guard struct {
	Path     string          `json:"path"`
	Operator string          `json:"operator"`
	Value    json.RawMessage `json:"value,omitempty"`

	segs []string
	val  any
	re   *regexp.Regexp
	ops  int // re's compiled program size (its cost per input byte)
}

// Throttle lets at most MaxPerWindow deliveries of the trigger through per
// WindowSeconds, counted separately per value of WindowKey (a content
// path; empty: one count).
type Throttle struct {
	MaxPerWindow  int    `json:"max_per_window"`
	WindowSeconds int64  `json:"window_seconds"`
	WindowKey     string `json:"window_key,omitempty"`
	keySegs       []string
}

// Target types.
const (
	TargetWebhook = "webhook" // URL receives a signed POST of the Payload
	TargetA2A     = "a2a"     // URL is an A2A agent card; its JSON-RPC url receives message/send
)

// Target is where deliveries go: a webhook URL, or the agent card URL of
// an A2A agent.
type Target struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// ParseSpec decodes and checks a trigger body. allowHTTP admits http://
// targets (for an operator who allows private receivers). Errors are
// *protocol.Error invalid_trigger.
func ParseSpec(body []byte, allowHTTP bool) (*Spec, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, bad("trigger body: %v", err)
	}
	if dec.More() {
		return nil, bad("trigger body: trailing data")
	}
	if err := s.check(allowHTTP); err != nil {
		return nil, err
	}
	return &s, nil
}

func bad(format string, a ...any) error { return protocol.Errorf(CodeInvalidTrigger, format, a...) }

func (s *Spec) check(allowHTTP bool) error {
	m := &s.Match
	if m.Type != "" {
		if len(m.Type) > 256 {
			return bad("match.type is at most 256 bytes")
		}
		if k, ok := strings.CutPrefix(m.Type, "anp2.kind."); ok {
			n, err := strconv.ParseInt(k, 10, 64)
			if err != nil || n < 0 || strconv.FormatInt(n, 10) != k {
				return bad("match.type %q: anp2.kind.<n> takes a non-negative decimal kind", clip(m.Type))
			}
		}
	}
	if m.Type == "" && len(m.Kinds) == 0 && len(m.Authors) == 0 && len(m.Tags) == 0 {
		return bad("match needs at least one of type, kinds, authors, tags")
	}
	if len(s.Name) > 128 || len(s.Description) > 4096 {
		return bad("a trigger's name is at most 128 bytes and its description 4096")
	}
	if len(m.Kinds) > maxListValues || len(m.Authors) > maxListValues || len(m.Tags) > 16 {
		return bad("match lists at most %d kinds or authors and 16 tag names", maxListValues)
	}
	for _, k := range m.Kinds {
		if k < 0 {
			return bad("kinds are non-negative")
		}
	}
	for _, a := range m.Authors {
		if !protocol.IsHex64(a) {
			return bad("authors are 64 lowercase hex")
		}
	}
	for name, vals := range m.Tags {
		if name == "" || len(name) > 64 || len(vals) == 0 || len(vals) > maxListValues {
			return bad("a tag condition names a tag (1-64 bytes) and lists 1 to %d values", maxListValues)
		}
		for _, v := range vals {
			if len(v) > 1024 {
				return bad("tag values are at most 1024 bytes")
			}
		}
	}
	if len(s.Filter) > maxGuards {
		return bad("at most %d filters", maxGuards)
	}
	for i := range s.Filter {
		if err := s.Filter[i].compile(); err != nil {
			return err
		}
	}
	if t := s.Throttle; t != nil {
		if t.MaxPerWindow < 1 || t.WindowSeconds < 1 || t.WindowSeconds > 30*86400 {
			return bad("throttle: max_per_window >= 1 and window_seconds from 1 to 2592000")
		}
		if t.WindowKey != "" {
			segs, err := parsePath(t.WindowKey)
			if err != nil {
				return err
			}
			t.keySegs = segs
		}
	}
	if k := s.DeduplicationKey; k != "" {
		if name, ok := strings.CutPrefix(k, "#"); ok {
			if name == "" || len(name) > 64 {
				return bad("deduplication_key #name names a tag of 1-64 bytes")
			}
			s.dedupTag = name
		} else {
			segs, err := parsePath(k)
			if err != nil {
				return err
			}
			s.dedupSegs = segs
		}
	}
	switch {
	case s.Agent != "" && s.Target != nil:
		return bad("a trigger has a target or an agent, not both")
	case s.Agent != "":
		if !validName(s.Agent) {
			return bad("agent %q: a manifest id is 1-128 bytes of letters, digits and . _ -", clip(s.Agent))
		}
		return nil
	case s.Target == nil:
		return bad("a trigger needs a target (or, in a PAP document, an agent)")
	}
	return s.Target.check(allowHTTP)
}

// validName reports whether n may name a trigger or an agent manifest:
// 1-128 bytes of ASCII letters, digits, '.', '_' and '-'.
func validName(n string) bool {
	if n == "" || len(n) > 128 {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// DedupKey is the event's deduplication key for this trigger ("" when
// the trigger has none or the event lacks it).
func (s *Spec) DedupKey(e *protocol.Event) string { return s.dedupKeyOn(&docCache{e: e}) }

func (s *Spec) dedupKeyOn(dc *docCache) string {
	switch {
	case s.dedupTag != "":
		v := dc.e.TagValue(s.dedupTag)
		if len(v) > 1024 {
			v = v[:1024]
		}
		return v
	case s.dedupSegs != nil:
		v, ok := lookup(dc.get(), s.dedupSegs)
		if !ok || v == nil {
			return ""
		}
		if str, ok := v.(string); ok && len(str) <= 1024 {
			return str
		}
		b, _ := json.Marshal(v)
		if len(b) > 1024 {
			return "" // a key this long is no key
		}
		return string(b)
	case s.DeduplicationKey == "$":
		if len(dc.e.Content) <= 1024 {
			return dc.e.Content
		}
	}
	return ""
}

func (t *Target) check(allowHTTP bool) error {
	if t.Type != TargetWebhook && t.Type != TargetA2A {
		return bad("target.type must be \"webhook\" or \"a2a\"")
	}
	return checkURL("target.url", t.URL, allowHTTP)
}

// checkURL checks a URL the relay will call: absolute, without
// credentials or fragment, https (or http when allowHTTP).
func checkURL(what, raw string, allowHTTP bool) error {
	u, err := url.Parse(raw)
	if err != nil || len(raw) > maxURL || u.Host == "" || u.User != nil || u.Fragment != "" {
		return bad("%s must be an absolute URL without credentials or fragment, at most %d bytes", what, maxURL)
	}
	if u.Scheme != "https" && !(allowHTTP && u.Scheme == "http") {
		return protocol.Errorf(CodeTargetRefused, "%s must be https", what)
	}
	return nil
}

// parsePath parses "$.a.b" (or "$" alone, the whole content); segments
// are names, or decimal array indexes.
func parsePath(p string) ([]string, error) {
	if p == "$" {
		return nil, nil
	}
	rest, ok := strings.CutPrefix(p, "$.")
	if !ok || rest == "" {
		return nil, bad("path %q must be $ or $.name(.name)*", clip(p))
	}
	segs := strings.Split(rest, ".")
	if len(segs) > maxPathSegs {
		return nil, bad("path %q has more than %d segments", clip(p), maxPathSegs)
	}
	for _, s := range segs {
		if s == "" || len(s) > 256 {
			return nil, bad("path %q has an empty or overlong segment", clip(p))
		}
	}
	return segs, nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

var operators = map[string]bool{"eq": true, "ne": true, "lt": true, "lte": true, "gt": true, "gte": true,
	"in": true, "not_in": true, "contains": true, "exists": true, "regex": true}

func (g *Guard) compile() error {
	if !operators[g.Operator] {
		return bad("unknown operator %q (known: eq ne lt lte gt gte in not_in contains exists regex)", clip(g.Operator))
	}
	segs, err := parsePath(g.Path)
	if err != nil {
		return err
	}
	g.segs = segs
	if len(g.Value) > maxValueBytes {
		return bad("a filter value is at most %d bytes", maxValueBytes)
	}
	if g.Operator == "exists" {
		if len(g.Value) != 0 {
			return bad("exists takes no value")
		}
		return nil
	}
	if len(g.Value) == 0 {
		return bad("operator %s needs a value", g.Operator)
	}
	if err := decodeNumber(g.Value, &g.val); err != nil {
		return bad("filter value: %v", err)
	}
	switch g.Operator {
	case "lt", "lte", "gt", "gte":
		if _, ok := g.val.(float64); !ok {
			return bad("%s compares numbers; value must be a number", g.Operator)
		}
	case "in", "not_in":
		if _, ok := g.val.([]any); !ok {
			return bad("%s takes a list value", g.Operator)
		}
	case "contains":
		if _, ok := g.val.(string); !ok {
			return bad("contains takes a string value")
		}
	case "regex":
		s, ok := g.val.(string)
		if !ok || len(s) > maxRegex {
			return bad("regex takes an RE2 pattern string of at most %d bytes", maxRegex)
		}
		re, ops, err := compileRegex(s)
		if err != nil {
			return err
		}
		g.re, g.ops = re, ops
	}
	return nil
}

// Bounds of a regex filter's cost (SPEC §20.2): RE2 runs in time linear
// in the input, times the size of the compiled program, so both the
// repetition counts and the program are capped at registration.
const (
	maxRepeat   = 100 // the largest {n}, {n,} or {n,m} count
	maxRegexOps = 500 // instructions of the compiled, simplified program
)

// compileRegex compiles an RE2 pattern whose cost is bounded: every
// repetition count at most maxRepeat, the compiled program (repetitions
// expanded, nested ones multiplied) at most maxRegexOps instructions.
// Errors are invalid_trigger.
func compileRegex(pat string) (*regexp.Regexp, int, error) {
	re, err := syntax.Parse(pat, syntax.Perl)
	if err != nil {
		return nil, 0, bad("regex: %v", err)
	}
	if n := maxRepeatOf(re); n > maxRepeat {
		return nil, 0, bad("regex: a repetition count of %d is over the maximum of %d", n, maxRepeat)
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, 0, bad("regex: %v", err)
	}
	if len(prog.Inst) > maxRegexOps {
		return nil, 0, bad("regex: its program has %d instructions, over the maximum of %d (fewer or smaller repetitions)", len(prog.Inst), maxRegexOps)
	}
	out, err := regexp.Compile(pat)
	if err != nil {
		return nil, 0, bad("regex: %v", err)
	}
	return out, len(prog.Inst), nil
}

// regexWork is the cost charged for running a regex of ops instructions
// over n bytes: RE2's automaton advances every instruction at every byte
// at worst.
func regexWork(ops, n int) int64 { return int64(ops) * int64(n+1) }

// maxRepeatOf is the largest repetition count in re.
func maxRepeatOf(re *syntax.Regexp) int {
	n := 0
	if re.Op == syntax.OpRepeat {
		n = max(re.Min, re.Max)
	}
	for _, s := range re.Sub {
		n = max(n, maxRepeatOf(s))
	}
	return n
}

// decodeNumber decodes JSON with numbers as float64 (rejecting numbers
// beyond float64).
func decodeNumber(b []byte, v *any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return err
	}
	return nil
}

// MatchEvent reports whether e passes the match and every guard.
func (s *Spec) MatchEvent(e *protocol.Event) bool {
	work := int64(math.MaxInt64)
	return s.matchOn(&docCache{e: e}, &work)
}

// matchOn is MatchEvent on dc's event, its content parsed once in dc. A
// regex filter costs its program size times the length of the string it
// scans (regexWork), taken from *work before it runs; one that would
// take *work below zero is not run, the trigger does not match, and
// *work is left negative (the owner's budget is spent).
func (s *Spec) matchOn(dc *docCache, work *int64) bool {
	e, m := dc.e, &s.Match
	if m.Type != "" && !matchType(e, m.Type) {
		return false
	}
	if len(m.Kinds) > 0 && !contains(m.Kinds, e.Kind) {
		return false
	}
	if len(m.Authors) > 0 && !contains(m.Authors, e.AgentID) {
		return false
	}
	for name, vals := range m.Tags {
		if !hasTag(e, name, vals) {
			return false
		}
	}
	if len(s.Filter) == 0 {
		return true
	}
	doc := dc.get()
	for i := range s.Filter {
		if !s.Filter[i].holds(doc, work) {
			return false
		}
	}
	return true
}

// matchType is the PAP type mapping (SPEC §16): "anp2.kind.<n>" is kind
// n; any other type is an event tagged ["t", type] or ["s", type].
func matchType(e *protocol.Event, typ string) bool {
	if k, ok := strings.CutPrefix(typ, "anp2.kind."); ok {
		return strconv.FormatInt(e.Kind, 10) == k
	}
	return hasTag(e, "t", []string{typ}) || hasTag(e, "s", []string{typ})
}

func contains[T comparable](xs []T, x T) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func hasTag(e *protocol.Event, name string, vals []string) bool {
	for _, t := range e.Tags {
		if len(t) >= 2 && t[0] == name && contains(vals, t[1]) {
			return true
		}
	}
	return false
}

// content parses e's content as JSON; nil when it is not JSON (paths
// then find nothing, except $ which is the content string).
func content(e *protocol.Event) any {
	var v any
	if json.Unmarshal([]byte(e.Content), &v) != nil {
		return e.Content
	}
	return v
}

// lookup follows segs into doc.
func lookup(doc any, segs []string) (any, bool) {
	cur := doc
	for _, s := range segs {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[s]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// holds evaluates the guard. A missing field satisfies only ne and
// not_in; a field of the wrong type fails every comparison.
func (g *Guard) holds(doc any, work *int64) bool {
	v, ok := lookup(doc, g.segs)
	if g.Operator == "exists" {
		return ok && v != nil
	}
	if !ok {
		return g.Operator == "ne" || g.Operator == "not_in"
	}
	switch g.Operator {
	case "eq":
		return equal(v, g.val)
	case "ne":
		return !equal(v, g.val)
	case "lt", "lte", "gt", "gte":
		x, ok := v.(float64)
		if !ok || math.IsNaN(x) {
			return false
		}
		y := g.val.(float64)
		switch g.Operator {
		case "lt":
			return x < y
		case "lte":
			return x <= y
		case "gt":
			return x > y
		}
		return x >= y
	case "in", "not_in":
		in := false
		for _, w := range g.val.([]any) {
			in = in || equal(v, w)
		}
		return in == (g.Operator == "in")
	case "contains":
		s, ok := v.(string)
		return ok && strings.Contains(s, g.val.(string))
	case "regex":
		s, ok := v.(string)
		if !ok {
			return false
		}
		if *work -= regexWork(g.ops, len(s)); *work < 0 {
			return false
		}
		return g.re.MatchString(s)
	}
	return false
}

// equal compares two decoded JSON values.
func equal(a, b any) bool {
	switch x := a.(type) {
	case nil, bool, float64, string:
		return a == b
	default:
		ja, err1 := json.Marshal(x)
		jb, err2 := json.Marshal(b)
		return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
	}
}

// ThrottleKey is the throttle's window key for e ("" without a key path
// or when the path finds nothing; a found value is its JSON).
func (s *Spec) ThrottleKey(e *protocol.Event) string { return s.throttleKeyOn(&docCache{e: e}) }

// throttleKeyOn is ThrottleKey on dc's event.
func (s *Spec) throttleKeyOn(dc *docCache) string {
	if s.Throttle == nil || s.Throttle.keySegs == nil {
		return ""
	}
	v, ok := lookup(dc.get(), s.Throttle.keySegs)
	if !ok {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// String renders s for logs.
func (s *Spec) String() string {
	if s.Target == nil {
		return fmt.Sprintf("trigger{%v → agent %s}", s.Match, s.Agent)
	}
	return fmt.Sprintf("trigger{%v → %s}", s.Match, s.Target.URL)
}
