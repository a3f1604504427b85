package stream

import (
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// FuzzParseFilter: any query either parses or fails with one of the
// package's codes, never panics, and a parsed filter matches exactly what
// an independent, naive reading of the same query matches.
func FuzzParseFilter(f *testing.F) {
	s := newSample()
	for _, q := range []string{
		"", "kinds=1,7&t=weather", "filter=kind:1,t:weather", "filter=author:" + s.a + ",kind:50",
		"filter=p:" + s.a + ",e:" + s.ev[2].ID, "authors=" + s.a + "," + s.b + "&filter=author:" + s.b,
		"filter=color:red", "filter=kind:1,kind:2", "cap=translate&since=1001&until=2000", "after=5&x=y",
		"ids=" + s.ev[0].ID + "&filter=id:" + s.ev[0].ID, "filter=t:weather,t:news", "kinds=1&filter=kind:2",
		"filter=sender:" + s.a + ",content_type:json", "filter=content_type:anp.heartbeat.v1,org:acme",
		"filter=tool:x,content_type:text,content_type:json",
	} {
		f.Add(q)
	}
	codes := []string{CodeUnknownParam, CodeBadParameter, CodeFilterAxisUnknown, CodeFilterValueInvalid}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		flt, err := ParseFilter(v)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) || !slices.Contains(codes, pe.Code) {
				t.Fatalf("uncoded error %v", err)
			}
			return
		}
		for i, e := range s.ev {
			if got, want := flt.Match(e), naiveMatch(v, e); got != want {
				t.Fatalf("event %d: Match=%v, naive reading=%v", i, got, want)
			}
		}
	})
}

// naiveMatch evaluates an accepted query against e straight from its text:
// every parameter and every clause is one condition; lists are OR.
func naiveMatch(v url.Values, e *protocol.Event) bool {
	for name, vals := range v {
		list := strings.Split(vals[0], ",")
		var ok bool
		switch name {
		case "after":
			ok = true
		case "kinds", "kind":
			ok = slices.Contains(list, strconv.FormatInt(e.Kind, 10)) || slices.ContainsFunc(list, func(k string) bool {
				n, _ := strconv.ParseInt(k, 10, 64)
				return n == e.Kind // leading zeros
			})
		case "authors":
			ok = slices.Contains(list, e.AgentID)
		case "ids":
			ok = slices.Contains(list, e.ID)
		case "since", "until":
			n, _ := strconv.ParseInt(vals[0], 10, 64)
			ok = name == "since" && e.CreatedAt >= n || name == "until" && e.CreatedAt <= n
		case "filter":
			ok = true
			for _, c := range list {
				axis, val, _ := strings.Cut(c, ":")
				ok = ok && naiveClause(axis, val, e)
			}
		default:
			ok = slices.ContainsFunc(list, func(x string) bool { return hasTag(e, name, x) })
		}
		if !ok {
			return false
		}
	}
	return true
}

func naiveClause(axis, val string, e *protocol.Event) bool {
	switch axis {
	case "kind":
		n, _ := strconv.ParseInt(val, 10, 64)
		return n == e.Kind
	case "author", "sender":
		return val == e.AgentID
	case "id":
		return val == e.ID
	case "org", "tool":
		return false
	case "content_type":
		if val == "json" || val == "text" {
			var obj map[string]any
			isObj := json.Unmarshal([]byte(e.Content), &obj) == nil && obj != nil
			return isObj == (val == "json")
		}
		return hasTag(e, "s", val)
	}
	return hasTag(e, axis, val)
}

func hasTag(e *protocol.Event, name, val string) bool {
	return slices.ContainsFunc(e.Tags, func(t []string) bool { return len(t) >= 2 && t[0] == name && t[1] == val })
}
