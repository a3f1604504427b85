package relay

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/httpx"
)

// Query holds a parsed GET /events query.
type Query struct {
	Filter        eventlog.Filter
	IncludeHidden bool
	WantCBOR      bool
	// Branches is the ?branch= list (seed §11.3.3), judged by the
	// registered Branches (see Server.ServeBranches).
	Branches []string
}

// queryParams are the parameters GET /events understands besides
// single-letter tag names; anything else is rejected so a typo never widens
// or empties a result silently.
var queryParams = map[string]bool{
	"ids": true, "kinds": true, "authors": true, "cap": true, "cap_wanted": true, "since": true, "until": true,
	"limit": true, "as_of": true, "include_revoked": true, "include_hidden": true,
	"kind":   true, // the network's existing clients' name for kinds
	"branch": true,
}

// ParseQuery parses GET /events parameters. Lists are comma-separated (a
// tag value's own comma written `\,`, see SplitList); ids and authors are 64 lowercase hex; kinds, since, until and as_of are
// non-negative integers; limit is 1..1000 (default 100). Errors are
// *protocol.Error with code invalid_parameter or unknown_parameter.
func ParseQuery(v url.Values) (Query, error) {
	var q Query
	f := &q.Filter
	f.Limit = 100
	for name, vals := range v {
		if !queryParams[name] && !isTagParam(name) {
			return q, protocol.Errorf(CodeUnknownParam, "unknown query parameter %q", name)
		}
		if len(vals) != 1 {
			return q, protocol.Errorf(CodeBadParameter, "parameter %q given %d times; use one comma-separated list", name, len(vals))
		}
	}
	var err error
	if f.IDs, err = hexList(v, "ids"); err != nil {
		return q, err
	}
	if f.Authors, err = hexList(v, "authors"); err != nil {
		return q, err
	}
	if v.Has("kind") {
		if v.Has("kinds") {
			return q, protocol.Errorf(CodeBadParameter, "give kinds or its alias kind, not both")
		}
		v = cloneWith(v, "kinds", v.Get("kind"))
	}
	if s := v.Get("kinds"); s != "" {
		for _, k := range strings.Split(s, ",") {
			n, err := httpx.NonNegative("kinds", k)
			if err != nil {
				return q, err
			}
			f.Kinds = append(f.Kinds, n)
		}
	}
	for _, p := range []struct {
		name string
		dst  **int64
	}{{"since", &f.Since}, {"until", &f.Until}, {"as_of", &f.AsOf}} {
		if s, ok := v[p.name]; ok {
			n, err := httpx.NonNegative(p.name, s[0])
			if err != nil {
				return q, err
			}
			*p.dst = &n
		}
	}
	if s, ok := v["limit"]; ok {
		n, err := strconv.Atoi(s[0])
		if err != nil || n < 1 || n > 1000 {
			return q, protocol.Errorf(CodeBadParameter, "limit must be an integer from 1 to 1000")
		}
		f.Limit = n
	}
	if s := v.Get("branch"); s != "" {
		q.Branches = strings.Split(s, ",")
		if len(q.Branches) > 100 {
			return q, protocol.Errorf(CodeBadParameter, "branch lists more than 100 values")
		}
	}
	if f.IncludeRevoked, err = httpx.BoolParam(v, "include_revoked"); err != nil {
		return q, err
	}
	if q.IncludeHidden, err = httpx.BoolParam(v, "include_hidden"); err != nil {
		return q, err
	}
	for name, vals := range v {
		if name != "cap" && name != "cap_wanted" && !isTagParam(name) {
			continue
		}
		tagVals := SplitList(vals[0]) // a value may hold a comma, written \,
		for _, tv := range tagVals {
			if tv == "" || len(tv) > 1024 {
				return q, protocol.Errorf(CodeBadParameter, "tag filter %q needs non-empty values of at most 1024 bytes", name)
			}
		}
		if len(tagVals) > 100 {
			return q, protocol.Errorf(CodeBadParameter, "tag filter %q lists more than 100 values", name)
		}
		if (name == "e" || name == "p") && !allHex64(tagVals) {
			return q, protocol.Errorf(CodeBadParameter, "%s values must be 64 lowercase hex characters", name)
		}
		if f.Tags == nil {
			f.Tags = map[string][]string{}
		}
		f.Tags[name] = tagVals
	}
	return q, nil
}

func isTagParam(name string) bool {
	return len(name) == 1 && (name[0] >= 'a' && name[0] <= 'z' || name[0] >= 'A' && name[0] <= 'Z')
}

func hexList(v url.Values, name string) ([]string, error) {
	s := v.Get(name)
	if s == "" {
		return nil, nil
	}
	list := strings.Split(s, ",")
	if len(list) > 1000 {
		return nil, protocol.Errorf(CodeBadParameter, "%s lists more than 1000 values", name)
	}
	if !allHex64(list) {
		return nil, protocol.Errorf(CodeBadParameter, "%s must be 64 lowercase hex characters each", name)
	}
	return list, nil
}

func allHex64(list []string) bool {
	for _, x := range list {
		if !protocol.IsHex64(x) {
			return false
		}
	}
	return true
}

// cloneWith returns a copy of v with name set to value.
func cloneWith(v url.Values, name, value string) url.Values {
	out := make(url.Values, len(v)+1)
	for k, x := range v {
		out[k] = x
	}
	out.Set(name, value)
	return out
}

// SplitList splits a comma-separated list of tag values (GET /events and
// GET /stream tag parameters, filter= clauses). Inside a value, `\,` is a
// comma and `\\` a backslash, so every value a tag can hold can be asked
// for; any other backslash stands for itself, so a list without those two
// pairs splits exactly on its commas, as it always did. EscapeListValue is
// its inverse.
func SplitList(s string) []string {
	if !strings.Contains(s, `\`) {
		return strings.Split(s, ",")
	}
	var out []string
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s) && (s[i+1] == ',' || s[i+1] == '\\'):
			i++
			b.WriteByte(s[i])
		case c == ',':
			out = append(out, b.String())
			b.Reset()
		default:
			b.WriteByte(c)
		}
	}
	return append(out, b.String())
}

var listEscaper = strings.NewReplacer(`\`, `\\`, `,`, `\,`)

// EscapeListValue returns v written as one item of a SplitList list: its
// backslashes doubled and its commas preceded by a backslash.
func EscapeListValue(v string) string { return listEscaper.Replace(v) }
