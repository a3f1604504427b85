package stream

import (
	"encoding/json"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
)

// Limits on one filter, so a subscriber cannot make every Publish expensive.
const (
	maxListValues = 1000 // ids, authors, kinds
	maxTagValues  = 100  // values of one tag parameter (as GET /events)
	maxTagValue   = 1024 // bytes of one tag value (the protocol's own limit)
	maxClauses    = 64   // clauses in filter=
	setThreshold  = 8    // lists longer than this are matched through a map
)

// Filter selects the events one subscriber receives. Every condition that is
// set must hold (AND); the values listed within one condition are
// alternatives (OR). The zero Filter matches every event. Treat a Filter as
// read-only once ParseFilter has returned it.
type Filter struct {
	IDs     []string // event ids (64 hex), any of
	Kinds   []int64  // kinds, any of
	Authors []string // agent ids (64 hex), any of
	// Tags are tag conditions, all of which must hold.
	Tags  []TagCond
	Since *int64 // created_at >= Since
	Until *int64 // created_at <= Until
	// After is the log sequence to resume after (?after=); nil means live
	// from now. A Last-Event-ID header, when present, overrides it.
	After *int64
	// Branches are the ?branch= ids (§11.3.3; empty: the relay's preferred
	// branch). The module turns them into a membership test (SetBranch).
	Branches []string

	// require are further tests every event must pass: the branch
	// membership (SetBranch) and modules' extra parameters (Require).
	require []func(*protocol.Event) bool
	// never is set by a forward-compatible clause (org:, tool:) that
	// parses but matches no event yet (seed 001 §8).
	never bool
	// contentType is a content_type:json or content_type:text clause's
	// value ("" when there is none).
	contentType string

	ids, authors map[string]struct{}
	kinds        map[int64]struct{}
}

// TagCond holds when the event carries a tag named Name whose value (its
// second element) is one of Values.
type TagCond struct {
	Name   string
	Values []string
	set    map[string]struct{}
}

// streamParams are the query parameters GET /stream understands besides
// single-letter tag names.
var streamParams = map[string]bool{
	"ids": true, "kinds": true, "authors": true, "cap": true, "cap_wanted": true, "since": true,
	"until": true, "filter": true, "after": true,
	"kind":   true, // alias of kinds (the network's existing clients' name)
	"branch": true,
}

// ParseFilter parses GET /stream query parameters: the GET /events matching
// parameters (ids, kinds, authors, cap, since, until and single-letter tag
// names, each a comma-separated list given once), a filter= expression of
// comma-separated axis:value clauses, and after=<seq>. Everything is ANDed.
// Errors are *protocol.Error with code unknown_parameter, invalid_parameter,
// filter-axis-unknown or filter-value-invalid.
func ParseFilter(v url.Values) (*Filter, error) {
	names := make([]string, 0, len(v))
	for name, vals := range v {
		if !streamParams[name] && !isTagParam(name) {
			return nil, protocol.Errorf(CodeUnknownParam, "unknown query parameter %q", clip(name))
		}
		if len(vals) != 1 {
			return nil, protocol.Errorf(CodeBadParameter, "parameter %q given %d times; use one comma-separated list", name, len(vals))
		}
		names = append(names, name)
	}
	sort.Strings(names) // deterministic: the same query always fails the same way
	if v.Has("kind") {
		if v.Has("kinds") {
			return nil, protocol.Errorf(CodeBadParameter, "give kinds or its alias kind, not both")
		}
		for i, n := range names {
			if n == "kind" {
				names[i] = "kinds"
			}
		}
		w := make(url.Values, len(v))
		for k, x := range v {
			w[k] = x
		}
		w["kinds"] = v["kind"]
		v = w
	}
	f := &Filter{}
	for _, name := range names {
		if err := f.param(name, v[name][0]); err != nil {
			return nil, err
		}
	}
	if f.Since != nil && f.Until != nil && *f.Since > *f.Until {
		return nil, protocol.Errorf(CodeFilterValueInvalid, "since is after until; the stream could never match")
	}
	f.compile()
	return f, nil
}

// Never reports whether f can match no event at all: it holds an org: or
// tool: clause, which seed 001 §8 has parse and match nothing until the
// relay implements the scope they name. A reader of the stored log may
// skip the read.
func (f *Filter) Never() bool { return f.never }

// SetBranch makes f keep only the events in wants (nil: every event).
// The stream module sets it from the relay's branch selection for
// f.Branches, once per subscription.
func (f *Filter) SetBranch(wants func(*protocol.Event) bool) { f.Require(wants) }

// Require adds a test every event must pass (nil: none), such as a
// module's extra stream parameter (relay.Server.AddStreamFilter).
func (f *Filter) Require(ok func(*protocol.Event) bool) {
	if ok != nil {
		f.require = append(f.require, ok)
	}
}

// param applies one query parameter to f.
func (f *Filter) param(name, s string) error {
	switch name {
	case "branch":
		for _, b := range strings.Split(s, ",") {
			if b == "" || len(b) > 64 {
				return protocol.Errorf(CodeFilterValueInvalid, "branch must be a comma-separated list of branch ids or all")
			}
			f.Branches = append(f.Branches, b)
		}
		return nil
	case "after":
		n, err := parseSeq(s)
		if err != nil {
			return protocol.Errorf(CodeBadParameter, "after must be a non-negative integer log sequence")
		}
		f.After = &n
		return nil
	case "filter":
		return f.clauses(s)
	case "since", "until":
		n, err := parseUint(name, s)
		if err != nil {
			return err
		}
		if name == "since" {
			f.Since = &n
		} else {
			f.Until = &n
		}
		return nil
	}
	list := strings.Split(s, ",")
	switch name {
	case "ids", "authors":
		if len(list) > maxListValues {
			return protocol.Errorf(CodeFilterValueInvalid, "%s lists more than %d values", name, maxListValues)
		}
		for _, x := range list {
			if !protocol.IsHex64(x) {
				return protocol.Errorf(CodeFilterValueInvalid, "%s values must be 64 lowercase hex characters, got %q", name, clip(x))
			}
		}
		if name == "ids" {
			return intersect(&f.IDs, list, name)
		}
		return intersect(&f.Authors, list, name)
	case "kinds":
		if len(list) > maxListValues {
			return protocol.Errorf(CodeFilterValueInvalid, "kinds lists more than %d values", maxListValues)
		}
		kinds := make([]int64, 0, len(list))
		for _, x := range list {
			n, err := parseUint("kinds", x)
			if err != nil {
				return err
			}
			kinds = append(kinds, n)
		}
		return intersect(&f.Kinds, kinds, name)
	}
	return f.tagParam(name, relay.SplitList(s)) // a value may hold a comma, written \,
}

// tagParam adds the condition of a tag parameter (cap or a single letter).
func (f *Filter) tagParam(name string, list []string) error {
	if len(list) > maxTagValues {
		return protocol.Errorf(CodeFilterValueInvalid, "tag filter %q lists more than %d values", name, maxTagValues)
	}
	for _, x := range list {
		if err := checkTagValue(name, x); err != nil {
			return err
		}
	}
	f.Tags = append(f.Tags, TagCond{Name: name, Values: list})
	return nil
}

// clauses applies a filter= expression: comma-separated axis:value clauses
// (a value's own comma written \,, see relay.SplitList), each a condition
// of its own (so repeating an axis narrows, never widens).
func (f *Filter) clauses(expr string) error {
	list := relay.SplitList(expr)
	if len(list) > maxClauses {
		return protocol.Errorf(CodeFilterValueInvalid, "filter has more than %d clauses", maxClauses)
	}
	for _, c := range list {
		axis, val, ok := strings.Cut(c, ":")
		if !ok {
			if c == "" {
				return protocol.Errorf(CodeFilterValueInvalid, "filter has an empty clause")
			}
			return protocol.Errorf(CodeFilterValueInvalid, "filter clause %q is not axis:value", clip(c))
		}
		if err := f.clause(axis, val); err != nil {
			return err
		}
	}
	return nil
}

// knownAxes names the filter= axes in error details.
const knownAxes = "kind, author, sender, id, e, p, t, cap, content_type, org, tool"

// clause applies one axis:value clause.
func (f *Filter) clause(axis, val string) error {
	switch axis {
	case "kind":
		n, err := parseUint("kind", val)
		if err != nil {
			return err
		}
		return intersect(&f.Kinds, []int64{n}, "kind")
	case "author", "sender", "id":
		if !protocol.IsHex64(val) {
			return protocol.Errorf(CodeFilterValueInvalid, "%s must be 64 lowercase hex characters, got %q", axis, clip(val))
		}
		if axis == "id" {
			return intersect(&f.IDs, []string{val}, axis)
		}
		return intersect(&f.Authors, []string{val}, "author")
	case "e", "p", "t", "cap":
		if err := checkTagValue(axis, val); err != nil {
			return err
		}
		f.Tags = append(f.Tags, TagCond{Name: axis, Values: []string{val}})
		return nil
	case "content_type":
		return f.contentTypeClause(val)
	case "org", "tool":
		if err := checkTagValue(axis, val); err != nil {
			return err
		}
		f.never = true
		return nil
	}
	return protocol.Errorf(CodeFilterAxisUnknown, "unknown filter axis %q (known: %s)", clip(axis), knownAxes)
}

// contentTypeClause applies content_type:<value> (§7): json holds for an
// event whose content is a JSON object, text for any other content, and
// any other value names a schema, held by an event that carries an
// ["s", value] tag (seed 003 §9.3); an event without one does not match.
func (f *Filter) contentTypeClause(val string) error {
	switch val {
	case "json", "text":
		if f.contentType != "" && f.contentType != val {
			return protocol.Errorf(CodeFilterValueInvalid, "content_type:%s contradicts content_type:%s; the stream could never match", val, f.contentType)
		}
		if f.contentType == "" {
			f.contentType = val
			f.Require(func(e *protocol.Event) bool { return (ContentType(e.Content) == "json") == (val == "json") })
		}
		return nil
	}
	if err := checkTagValue("content_type", val); err != nil {
		return err
	}
	f.Tags = append(f.Tags, TagCond{Name: "s", Values: []string{val}})
	return nil
}

// ContentType returns "json" when content is a JSON object, else "text":
// the content_type axis's reading of an event's content (§7).
func ContentType(content string) string {
	i := 0
	for i < len(content) && (content[i] == ' ' || content[i] == '\t' || content[i] == '\n' || content[i] == '\r') {
		i++
	}
	if i < len(content) && content[i] == '{' && json.Valid([]byte(content)) {
		return "json"
	}
	return "text"
}

// intersect narrows *dst (nil: unconstrained) to the values also in vals and
// rejects a result that can never match.
func intersect[T comparable](dst *[]T, vals []T, name string) error {
	if *dst == nil {
		*dst = slices.Clone(vals)
		return nil
	}
	var out []T
	for _, v := range vals {
		if slices.Contains(*dst, v) && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return protocol.Errorf(CodeFilterValueInvalid, "%s contradicts an earlier %s condition; the stream could never match", name, name)
	}
	*dst = out
	return nil
}

func checkTagValue(name, x string) error {
	if x == "" || len(x) > maxTagValue {
		return protocol.Errorf(CodeFilterValueInvalid, "tag filter %q needs non-empty values of at most %d bytes", name, maxTagValue)
	}
	if (name == "e" || name == "p") && !protocol.IsHex64(x) {
		return protocol.Errorf(CodeFilterValueInvalid, "%s values must be 64 lowercase hex characters, got %q", name, clip(x))
	}
	return nil
}

func parseUint(name, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > protocol.MaxSafeInteger || !isDigit(s[0]) {
		return 0, protocol.Errorf(CodeFilterValueInvalid, "%s must be a non-negative integer, got %q", name, clip(s))
	}
	return n, nil
}

// parseSeq parses a log sequence (after=, Last-Event-ID).
func parseSeq(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || !isDigit(s[0]) {
		return 0, protocol.Errorf(CodeBadParameter, "a log sequence must be a non-negative integer")
	}
	return n, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isTagParam(name string) bool {
	return len(name) == 1 && (name[0] >= 'a' && name[0] <= 'z' || name[0] >= 'A' && name[0] <= 'Z')
}

// clip shortens user input quoted back in an error detail.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// compile builds the lookup maps Match uses for long lists.
func (f *Filter) compile() {
	f.ids, f.authors, f.kinds = toSet(f.IDs), toSet(f.Authors), toSet(f.Kinds)
	for i := range f.Tags {
		f.Tags[i].set = toSet(f.Tags[i].Values)
	}
}

func toSet[T comparable](list []T) map[T]struct{} {
	if len(list) <= setThreshold {
		return nil
	}
	m := make(map[T]struct{}, len(list))
	for _, v := range list {
		m[v] = struct{}{}
	}
	return m
}

func has[T comparable](list []T, set map[T]struct{}, v T) bool {
	if set != nil {
		_, ok := set[v]
		return ok
	}
	return slices.Contains(list, v)
}

// Match reports whether e satisfies every condition of f.
func (f *Filter) Match(e *protocol.Event) bool {
	if f.never {
		return false
	}
	for _, ok := range f.require {
		if !ok(e) {
			return false
		}
	}
	if len(f.Kinds) > 0 && !has(f.Kinds, f.kinds, e.Kind) ||
		len(f.Authors) > 0 && !has(f.Authors, f.authors, e.AgentID) ||
		len(f.IDs) > 0 && !has(f.IDs, f.ids, e.ID) ||
		f.Since != nil && e.CreatedAt < *f.Since ||
		f.Until != nil && e.CreatedAt > *f.Until {
		return false
	}
	for i := range f.Tags {
		if !f.Tags[i].match(e) {
			return false
		}
	}
	return true
}

func (c *TagCond) match(e *protocol.Event) bool {
	for _, t := range e.Tags {
		if len(t) >= 2 && t[0] == c.Name && has(c.Values, c.set, t[1]) {
			return true
		}
	}
	return false
}
