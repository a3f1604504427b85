package a2a

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks"
)

// tasks/list bounds.
const (
	defaultPageSize = 50
	maxPageSize     = 200
	maxOffset       = 10000
)

// listParams are the parsed tasks/list params.
type listParams struct {
	capability, requester, provider, contextID string
	branch                                     string       // "" the relay's preferred branch
	native                                     tasks.Status // filter on the native status
	state                                      TaskState    // filter on the projected A2A state
	size, offset, history                      int
	artifacts                                  bool
}

// listKeys maps every accepted param spelling to its canonical name: the
// §19.3 names, a2a-go v0.3.15's snake_case and the A2A camelCase forms.
var listKeys = map[string]string{
	"capability": "capability", "state": "state", "status": "status", "limit": "limit",
	"page_size": "limit", "pageSize": "limit", "page_token": "page_token", "pageToken": "page_token",
	"history_length": "history_length", "historyLength": "history_length",
	"include_artifacts": "include_artifacts", "includeArtifacts": "include_artifacts",
	"context_id": "context_id", "contextId": "context_id", "requester": "requester", "provider": "provider",
	"last_updated_after": "last_updated_after", "lastUpdatedAfter": "last_updated_after",
	"statusTimestampAfter": "last_updated_after", "metadata": "metadata", "tenant": "", "branch": "branch",
}

// collectList groups the raw params by canonical name; two spellings of
// one param must agree. Unknown names are -32602, so a typo never widens
// the list silently.
func collectList(raw json.RawMessage) (map[string]json.RawMessage, *Error) {
	var in map[string]json.RawMessage
	if err := decodeParams(raw, &in); err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		canon, ok := listKeys[k]
		if !ok {
			return nil, invalidParams("unknown tasks/list param %q; accepted: capability, state, status, limit (page_size, pageSize), "+
				"page_token (pageToken), history_length (historyLength), include_artifacts (includeArtifacts), "+
				"context_id (contextId), requester, provider, branch (or metadata.branch)", k)
		}
		v := in[k]
		if canon == "" || string(v) == "null" {
			continue
		}
		if prev, dup := out[canon]; dup && !jsonEqual(prev, v) {
			return nil, invalidParams("two spellings of %s disagree", canon)
		}
		out[canon] = v
	}
	return out, nil
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}

func parseList(raw json.RawMessage) (listParams, *Error) {
	p := listParams{size: defaultPageSize}
	in, err := collectList(raw)
	if err != nil {
		return p, err
	}
	if _, ok := in["last_updated_after"]; ok {
		return p, invalidParams("last_updated_after is not supported: tasks are listed by request time, newest first")
	}
	var state, status, token string
	for _, f := range []struct {
		k   string
		dst *string
	}{{"capability", &p.capability}, {"requester", &p.requester}, {"provider", &p.provider},
		{"context_id", &p.contextID}, {"state", &state}, {"status", &status}, {"page_token", &token}} {
		if v, ok := in[f.k]; ok && json.Unmarshal(v, f.dst) != nil {
			return p, invalidParams("%s must be a string", f.k)
		}
	}
	if err := p.setStates(state, status); err != nil {
		return p, err
	}
	if err := p.setBranch(in); err != nil {
		return p, err
	}
	if p.requester != "" && !protocol.IsHex64(p.requester) || p.provider != "" && !protocol.IsHex64(p.provider) {
		return p, invalidParams("requester and provider must be 64 lowercase hex characters")
	}
	return p, p.setNumbers(in, token)
}

// setBranch reads branch or metadata.branch (a metadata that is not an
// object is ignored, as before).
func (p *listParams) setBranch(in map[string]json.RawMessage) *Error {
	var top *string
	if v, ok := in["branch"]; ok {
		var b string
		if json.Unmarshal(v, &b) != nil {
			return invalidParams("branch must be a string")
		}
		top = &b
	}
	var md map[string]any
	if v, ok := in["metadata"]; ok && json.Unmarshal(v, &md) != nil {
		md = nil
	}
	b, err := branchOf(top, md)
	p.branch = b
	return err
}

// setStates reads state (§19.3: the native status; an A2A state is also
// understood) and status (an A2A state, as A2A clients send it).
func (p *listParams) setStates(state, status string) *Error {
	if state != "" && status != "" {
		return invalidParams("give state (native) or status (A2A), not both")
	}
	switch {
	case state != "" && tasks.Status(state).Valid():
		p.native = tasks.Status(state)
	case state != "":
		st, ok := parseState(state)
		if !ok {
			return invalidParams("state must be a native status %v or an A2A state", tasks.Statuses)
		}
		p.state = st
	case status != "":
		st, ok := parseState(status)
		if !ok {
			return invalidParams("status must be an A2A task state (submitted, working, completed, failed, canceled, …)")
		}
		p.state = st
	}
	return nil
}

// parseState reads an A2A state, also in its protobuf enum spelling
// (TASK_STATE_INPUT_REQUIRED).
func parseState(s string) (TaskState, bool) {
	s = strings.ToLower(strings.TrimPrefix(s, "TASK_STATE_"))
	s = strings.ReplaceAll(s, "_", "-")
	if s == "cancelled" {
		s = "canceled"
	}
	st := TaskState(s)
	return st, knownState(st)
}

func (p *listParams) setNumbers(in map[string]json.RawMessage, token string) *Error {
	num := func(k string, lo, hi int, dst *int) *Error {
		v, ok := in[k]
		if !ok {
			return nil
		}
		var n int
		if json.Unmarshal(v, &n) != nil || n < lo || n > hi {
			return invalidParams("%s must be an integer from %d to %d", k, lo, hi)
		}
		*dst = n
		return nil
	}
	if err := num("limit", 1, maxPageSize, &p.size); err != nil {
		return err
	}
	if err := num("history_length", 0, 1000, &p.history); err != nil {
		return err
	}
	if v, ok := in["include_artifacts"]; ok && json.Unmarshal(v, &p.artifacts) != nil {
		return invalidParams("include_artifacts must be a boolean")
	}
	if token != "" {
		off, ok := decodeToken(token)
		if !ok {
			return invalidParams("page_token is not a token this relay issued")
		}
		p.offset = off
	}
	return nil
}

const tokenPrefix = "anp2.tasks.offset."

func encodeToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tokenPrefix + strconv.Itoa(offset)))
}

func decodeToken(tok string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || !strings.HasPrefix(string(b), tokenPrefix) {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(b), tokenPrefix))
	if err != nil || n < 0 || n > maxOffset {
		return 0, false
	}
	return n, true
}

// listResult is the tasks/list answer. The page fields are given in both
// snake_case (a2a-go v0.3.x) and camelCase (A2A JSON).
type listResult struct {
	Tasks          []Task `json:"tasks"`
	PageSize       int    `json:"page_size"`
	PageSizeCamel  int    `json:"pageSize"`
	NextPageToken  string `json:"next_page_token"`
	NextTokenCamel string `json:"nextPageToken"`
}

func (a *Adapter) tasksList(raw json.RawMessage, base string) (any, *Error) {
	p, err := parseList(raw)
	if err != nil {
		return nil, err
	}
	src, err := a.source(p.branch)
	if err != nil {
		return nil, err
	}
	views, more := a.listNative(p, src)
	out := listResult{Tasks: make([]Task, 0, len(views)), PageSize: p.size, PageSizeCamel: p.size}
	for _, v := range views {
		out.Tasks = append(out.Tasks, a.nativeTask(v, base, p.history, p.artifacts))
	}
	if more && p.offset+p.size <= maxOffset {
		out.NextPageToken = encodeToken(p.offset + p.size)
		out.NextTokenCamel = out.NextPageToken
	}
	return out, nil
}

// listNative returns the page of native tasks p selects, newest first, and
// whether more follow. An A2A state filter is the union of the native
// statuses that project onto it.
func (a *Adapter) listNative(p listParams, src Tasks) ([]tasks.TaskView, bool) {
	if src == nil {
		return nil, false
	}
	if p.contextID != "" {
		return a.listContext(p, src)
	}
	statuses := []tasks.Status{p.native}
	if p.state != "" {
		statuses = nativeStatuses(p.state)
	}
	need := p.offset + p.size + 1
	var all []tasks.TaskView
	for _, s := range statuses {
		f := tasks.Filter{Capability: p.capability, Status: s, Requester: p.requester, Provider: p.provider, Limit: need}
		all = append(all, src.List(f)...)
	}
	if len(statuses) > 1 {
		sort.Slice(all, func(i, j int) bool {
			if all[i].CreatedAt != all[j].CreatedAt {
				return all[i].CreatedAt > all[j].CreatedAt
			}
			return all[i].TaskID > all[j].TaskID
		})
	}
	if p.offset >= len(all) {
		return nil, false
	}
	end := min(p.offset+p.size, len(all))
	return all[p.offset:end], len(all) > end
}

// listContext serves a contextId filter: a native task's contextId is its
// own id, so at most one task matches.
func (a *Adapter) listContext(p listParams, src Tasks) ([]tasks.TaskView, bool) {
	v, ok := lookupIn(src, p.contextID)
	if !ok || p.offset > 0 ||
		p.capability != "" && v.Capability != p.capability ||
		p.requester != "" && v.Requester != p.requester ||
		p.provider != "" && v.Provider != p.provider ||
		p.native != "" && v.Status != p.native ||
		p.state != "" && Project(v.Status) != p.state {
		return nil, false
	}
	return []tasks.TaskView{v}, false
}
