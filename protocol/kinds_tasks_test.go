package protocol

import (
	"bufio"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
)

const (
	taskID   = "a06f54f5f9c50dbcb707d04ae63d982401ec08d7a91a77ef65c53afbc1a19821"
	otherID  = "494d78f11e9448c220269dc9a9396bbd9e4ca08208c9abfb77b5f7a9a2dd3244"
	someAgnt = "37915e52fad55c4a321cf55c0f861cc478a55e281f44fe3dbb2a67debea9c646"
)

// patch returns base's JSON with path set to v (nil deletes it).
func patch(base string, path string, v any) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(base), &m); err != nil {
		panic(err)
	}
	keys := strings.Split(path, ".")
	cur := m
	for _, k := range keys[:len(keys)-1] {
		cur = cur[k].(map[string]any)
	}
	if v == nil {
		delete(cur, keys[len(keys)-1])
	} else {
		cur[keys[len(keys)-1]] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// raw splices a JSON literal in place of a marker, for numbers
// json.Marshal would not write (1e1, 10.0, huge integers).
type raw string

func patchRaw(base, path string, lit raw) string {
	const marker = "__RAW__"
	return strings.Replace(patch(base, path, marker), `"`+marker+`"`, string(lit), 1)
}

const request50 = `{"capability":"transform.text.demo","input":{"text":"Bonjour"},"constraints":{"max_cost_usd":"0.10","deadline_unix":1763886400},"reward":{"currency":"credit","amount":10,"payment_method":"anp2_credit","escrow_method":"none"}}`

var requestTags = [][]string{{"t", "transform.text.demo"}, {"cap_wanted", "transform.text.demo"}}

func codes(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, codeOf(e))
	}
	return out
}

type kindCase struct {
	name    string
	content string
	tags    [][]string
	want    []string // codes, in order; nil means valid
	warns   []string // warning codes of a valid event, in order
}

func runKindCases(t *testing.T, kind int64, cases []kindCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := signed(kind, tc.content, tc.tags...)
			got := codes(CheckKind(e))
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("codes %v, want %v; errors %v", got, tc.want, CheckKind(e))
			}
			var warns []string
			for _, w := range KindWarnings(e) {
				warns = append(warns, w.Code)
			}
			if strings.Join(warns, ",") != strings.Join(tc.warns, ",") {
				t.Fatalf("warnings %v, want %v: %v", warns, tc.warns, KindWarnings(e))
			}
		})
	}
}

func TestTaskRequestRule(t *testing.T) {
	liveRequest := patch(patch(request50, "capability", nil), "cap", "transform.text.demo")
	mocked := patch(patch(patch(request50, "reward.payment_method", "mocked"), "reward.currency", "USD"), "reward.amount", "0.05")
	c := CodeInvalidTaskContent
	r := CodeInvalidReward
	runKindCases(t, KindTaskRequest, []kindCase{
		{"credit request (the conformance vector)", request50, requestTags, nil, nil},
		{"mocked USD request", mocked, requestTags, nil, nil},
		{"USD amount as JSON number", patchRaw(mocked, "reward.amount", "0.05"), requestTags, nil, nil},
		{"credit reward without escrow (§18.11)", patch(request50, "reward.escrow_method", nil), requestTags, nil, nil},
		{"optional constraints typed", patch(patch(patch(request50, "constraints.accept_languages", []string{"fr"}), "constraints.min_provider_trust", 0.5), "constraints.high_stakes", true), requestTags, nil, nil},
		{"max cost as number", patchRaw(request50, "constraints.max_cost_usd", "0.1"), requestTags, nil, nil},
		{"not json", "hello", requestTags, []string{c}, nil},
		{"array content", "[]", requestTags, []string{c}, nil},
		{"trailing data", request50 + "{}", requestTags, []string{c}, nil},
		{"no capability", patch(request50, "capability", nil), requestTags, []string{c}, nil},
		{"blank capability", patch(request50, "capability", " "), requestTags, []string{c}, nil},
		{"no input", patch(request50, "input", nil), requestTags, nil, []string{WarnNoInput}},
		{"payload for input", patch(patch(request50, "input", nil), "payload", map[string]any{"text": "hi"}), requestTags, nil, []string{WarnNoInput}},
		{"deadline_at", patch(patch(request50, "constraints.deadline_unix", nil), "deadline_at", 1700000000), requestTags, nil, []string{WarnDeadline}},
		{"deadline_at a string", patch(patch(request50, "constraints.deadline_unix", nil), "deadline_at", "soon"), requestTags, []string{c}, nil},
		{"no constraints", patch(request50, "constraints", nil), requestTags, nil, []string{WarnNoPriceCap, WarnDeadline}},
		{"constraints not an object", patch(request50, "constraints", "soon"), requestTags, []string{c}, nil},
		{"no deadline", patch(request50, "constraints.deadline_unix", nil), requestTags, nil, []string{WarnDeadline}},
		{"deadline_sec (LangChain)", patch(patch(request50, "constraints.deadline_unix", nil), "constraints.deadline_sec", 600), requestTags, nil, []string{WarnDeadline}},
		{"deadline_sec string", patch(patch(request50, "constraints.deadline_unix", nil), "constraints.deadline_sec", "600"), requestTags, []string{c}, nil},
		{"no max cost (MCP)", patch(request50, "constraints.max_cost_usd", nil), requestTags, nil, []string{WarnNoPriceCap}},
		{"no payment method (MCP)", patch(request50, "reward.payment_method", nil), requestTags, nil, []string{WarnNoPaymentMethod}},
		{"LangChain defaults", `{"capability":"transform.text.demo","input":{},"constraints":{"deadline_sec":600},"reward":{"currency":"USD","amount":0}}`, requestTags, nil,
			[]string{WarnNoPriceCap, WarnDeadline, WarnNoPaymentMethod}},
		{"browser extension tags", request50, [][]string{{"t", "task"}, {"cap", "transform.text.demo"}}, nil, []string{WarnTaskTags, WarnTaskTags}},
		{"deadline string", patch(request50, "constraints.deadline_unix", "1763886400"), requestTags, []string{c}, nil},
		{"deadline float", patchRaw(request50, "constraints.deadline_unix", "1763886400.5"), requestTags, []string{c}, nil},
		{"negative max cost", patch(request50, "constraints.max_cost_usd", "-1"), requestTags, []string{c}, nil},
		{"max cost words", patch(request50, "constraints.max_cost_usd", "ten"), requestTags, []string{c}, nil},
		{"high_stakes string", patch(request50, "constraints.high_stakes", "yes"), requestTags, []string{c}, nil},
		{"languages not strings", patch(request50, "constraints.accept_languages", []int{1}), requestTags, []string{c}, nil},
		{"no reward", patch(request50, "reward", nil), requestTags, []string{r}, nil},
		{"unknown payment method", patch(request50, "reward.payment_method", "paypal"), requestTags, []string{r}, nil},
		{"unknown escrow", patch(request50, "reward.escrow_method", "bank"), requestTags, []string{r}, nil},
		{"no currency", patch(request50, "reward.currency", nil), requestTags, []string{r}, nil},
		{"credit amount string", patch(request50, "reward.amount", "10"), requestTags, nil, []string{WarnCreditAmount}},
		{"credit amount string negative", patch(request50, "reward.amount", "-10"), requestTags, []string{r}, nil},
		{"credit amount string fraction", patch(request50, "reward.amount", "10.5"), requestTags, []string{r}, nil},
		{"credit amount string empty", patch(request50, "reward.amount", ""), requestTags, []string{r}, nil},
		{"credit amount negative", patchRaw(request50, "reward.amount", "-1"), requestTags, []string{r}, nil},
		{"credit amount fraction", patchRaw(request50, "reward.amount", "10.5"), requestTags, nil, []string{WarnCreditAmount}},
		{"credit amount 10.0", patchRaw(request50, "reward.amount", "10.0"), requestTags, nil, []string{WarnCreditAmount}},
		{"credit amount exponent", patchRaw(request50, "reward.amount", "1e1"), requestTags, nil, []string{WarnCreditAmount}},
		{"credit amount 2^53 as a fraction", patchRaw(request50, "reward.amount", "9007199254740992.5"), requestTags, []string{r}, nil},
		{"credit amount negative fraction", patchRaw(request50, "reward.amount", "-0.5"), requestTags, []string{r}, nil},
		{"credit amount 2^53", patchRaw(request50, "reward.amount", "9007199254740992"), requestTags, []string{r}, nil},
		{"credit amount 2^53-1", patchRaw(request50, "reward.amount", "9007199254740991"), requestTags, nil, nil},
		{"credit amount zero", patchRaw(request50, "reward.amount", "0"), requestTags, nil, nil},
		{"mocked amount negative", patch(mocked, "reward.amount", "-0.05"), requestTags, []string{r}, nil},
		{"mocked amount missing", patch(mocked, "reward.amount", nil), requestTags, []string{r}, nil},
		{"cap alias, live network tags", liveRequest, [][]string{{"t", "task.request"}}, nil, nil},
		{"cap alias without tags", liveRequest, nil, nil, nil},
		{"cap alias, numeric max cost", patchRaw(liveRequest, "constraints.max_cost_usd", "0.5"), [][]string{{"t", "task.request"}}, nil, nil},
		{"cap alias blank", patch(liveRequest, "cap", ""), nil, []string{c}, nil},
		{"cap alias not a string", patch(liveRequest, "cap", 7), nil, []string{c}, nil},
		{"capability wins over cap, and wants its tags", patch(request50, "cap", "other"), [][]string{{"t", "task.request"}}, nil, []string{WarnTaskTags, WarnTaskTags}},
		{"extra t tag beside the canonical ones", request50, append([][]string{{"t", "task.request"}}, requestTags...), nil, nil},
		{"no t tag", request50, [][]string{{"cap_wanted", "transform.text.demo"}}, nil, []string{WarnTaskTags}},
		{"cap_wanted for another capability", request50, [][]string{{"t", "transform.text.demo"}, {"cap_wanted", "x"}}, nil, []string{WarnTaskTags}},
		{"every violation at once", patch(patch(request50, "capability", nil), "reward.payment_method", "x"), nil,
			[]string{c, r}, nil},
	})
}

func lifecycleTags(roles ...string) [][]string {
	var tags [][]string
	for _, r := range roles {
		tags = append(tags, []string{"e", taskID, r})
	}
	return append(tags, []string{"p", someAgnt})
}

func TestTaskAcceptRule(t *testing.T) {
	good := `{"eta_unix":1747600000,"price_quote":{"currency":"USD","amount":"0.04"},"terms_hash":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}`
	tags := lifecycleTags("root", "accept")
	runKindCases(t, KindTaskAccept, []kindCase{
		{"valid", good, tags, nil, nil},
		{"with t tag and task_id", patch(good, "task_id", taskID), append(tags, []string{"t", "x"}), nil, nil},
		{"empty terms hash", patch(good, "terms_hash", ""), tags, nil, nil},
		{"seed providers' terms label", patch(good, "terms_hash", "free-no-terms"), tags, nil, []string{WarnTermsHash}},
		{"terms hash not a string", patchRaw(good, "terms_hash", "7"), tags, []string{CodeInvalidTaskContent}, nil},
		{"no root: the accept tag names the task", good, lifecycleTags("accept"), nil, []string{WarnRootInferred}},
		{"browser extension accept", "", [][]string{{"e", taskID, "accept"}}, nil, []string{WarnRootInferred, WarnMissingP, WarnNoQuote}},
		{"no root, bad accept tag", good, [][]string{{"e", "xyz", "accept"}, {"p", someAgnt}}, []string{CodeInvalidTag, CodeMissingTag}, nil},
		{"no accept role", good, lifecycleTags("root"), []string{CodeMissingTag}, nil},
		{"root not hex", good, [][]string{{"e", "xyz", "root"}, {"e", taskID, "accept"}, {"p", someAgnt}}, []string{CodeInvalidTag, CodeInvalidTag}, nil},
		{"two roots", good, append(lifecycleTags("root", "accept"), []string{"e", otherID, "root"}), []string{CodeInvalidTag}, nil},
		{"no p", good, [][]string{{"e", taskID, "root"}, {"e", taskID, "accept"}}, nil, []string{WarnMissingP}},
		{"bad p", good, [][]string{{"e", taskID, "root"}, {"e", taskID, "accept"}, {"p", "me"}}, []string{CodeInvalidTag}, nil},
		{"no price quote", patch(good, "price_quote", nil), tags, nil, []string{WarnNoQuote}},
		{"price quote not an object", patch(good, "price_quote", "10 credits"), tags, []string{CodeInvalidTaskContent}, nil},
		{"content not JSON", "yes", tags, []string{CodeInvalidTaskContent}, nil},
		{"price quote without amount", patch(good, "price_quote.amount", nil), tags, []string{CodeInvalidTaskContent}, nil},
		{"eta string", patch(good, "eta_unix", "soon"), tags, []string{CodeInvalidTaskContent}, nil},
		{"task_id disagrees with root", patch(good, "task_id", otherID), tags, []string{CodeInvalidTaskContent}, nil},
	})
}

func TestTaskResultRule(t *testing.T) {
	good := `{"task_id":"` + taskID + `","output":{"text":"hello"},"runtime_ms":318,"output_format":"json"}`
	tags := lifecycleTags("root", "result", "accept")
	runKindCases(t, KindTaskResult, []kindCase{
		{"valid", good, tags, nil, nil},
		{"empty output allowed", patch(good, "output", ""), tags, nil, nil},
		{"no accept role (the live network's translator, D15)", good, lifecycleTags("root", "result"), nil, nil},
		{"no result role", good, lifecycleTags("root", "accept"), []string{CodeMissingTag}, nil},
		{"browser extension result", `{"output":"bonjour"}`, [][]string{{"e", taskID, "result"}}, nil, []string{WarnRootInferred, WarnMissingP}},
		{"runtime negative", patchRaw(good, "runtime_ms", "-1"), tags, []string{CodeInvalidTaskContent}, nil},
		{"format not string", patchRaw(good, "output_format", "1"), tags, []string{CodeInvalidTaskContent}, nil},
	})
}

func TestTaskVerifyRule(t *testing.T) {
	good := `{"task_id":"` + taskID + `","verdict":"passed","score":0.93,"reasons":["ok"],"evidence_event_ids":[]}`
	tags := lifecycleTags("root", "verify", "result")
	c := CodeInvalidTaskContent
	runKindCases(t, KindTaskVerify, []kindCase{
		{"valid", good, tags, nil, nil},
		{"failed without score", patch(patch(good, "verdict", "failed"), "score", nil), tags, nil, nil},
		{"disputed score 0", patchRaw(patch(good, "verdict", "disputed"), "score", "0"), tags, nil, nil},
		{"score 1.0", patchRaw(good, "score", "1.0"), tags, nil, nil},
		{"unknown verdict", patch(good, "verdict", "maybe"), tags, []string{c}, nil},
		{"no verdict", patch(good, "verdict", nil), tags, []string{c}, nil},
		{"score above 1", patchRaw(good, "score", "1.5"), tags, []string{c}, nil},
		{"score negative", patchRaw(good, "score", "-0.1"), tags, []string{c}, nil},
		{"score string", patch(good, "score", "0.5"), tags, []string{c}, nil},
		{"reasons not list", patch(good, "reasons", "fine"), tags, []string{c}, nil},
		{"reasons with null", patchRaw(good, "reasons", "[\"ok\",null]"), tags, []string{c}, nil},
		{"no verify role", good, lifecycleTags("root", "result"), []string{CodeMissingTag}, nil},
		{"no result tag (SDK)", good, lifecycleTags("root", "verify"), nil, []string{WarnVerifyNoResult}},
	})
}

func TestTaskPaymentRule(t *testing.T) {
	good := `{"task_id":"` + taskID + `","disposition":"release","payment_proof_url":"mock://x","amount":"0.0","currency":"USD","payment_method":"mocked","tx_hash":"mock-1"}`
	tags := lifecycleTags("root", "payment")
	c := CodeInvalidTaskContent
	runKindCases(t, KindPayment, []kindCase{
		{"valid", good, tags, nil, nil},
		{"credit announcement", patch(patch(good, "payment_method", "anp2_credit"), "tx_hash", nil), tags, nil, nil},
		{"refund", patch(good, "disposition", "refund"), tags, nil, nil},
		{"partial", patch(good, "disposition", "partial"), tags, []string{c}, nil},
		{"cash", patch(good, "payment_method", "cash"), tags, []string{c}, nil},
		{"negative amount", patch(good, "amount", "-1"), tags, []string{c}, nil},
		{"tx hash number", patchRaw(good, "tx_hash", "1"), tags, []string{c}, nil},
		{"no payment role", good, lifecycleTags("root"), []string{CodeMissingTag}, nil},
		{"no p (MCP anp2_release_payment)", good, [][]string{{"e", taskID, "root"}, {"e", taskID, "payment"}}, nil, []string{WarnMissingP}},
	})
}

func TestTaskCancelRule(t *testing.T) {
	good := `{"task_id":"` + taskID + `","reason":"requirements changed"}`
	tags := [][]string{{"e", taskID, "root"}, {"e", taskID, "cancel"}, {"t", "transform.text.demo"}}
	runKindCases(t, KindTaskCancel, []kindCase{
		{"valid without p", good, tags, nil, nil},
		{"empty object", "{}", tags, nil, nil},
		{"reason number", patchRaw(good, "reason", "3"), tags, []string{CodeInvalidTaskContent}, nil},
		{"empty content", "", tags, []string{CodeInvalidTaskContent}, nil},
		{"no cancel role", good, [][]string{{"e", taskID, "root"}}, []string{CodeMissingTag}, nil},
	})
}

func TestTaskRoot(t *testing.T) {
	cases := map[string]struct {
		tags [][]string
		want string
	}{
		"one root":              {[][]string{{"e", taskID, "root"}}, taskID},
		"repeated root":         {[][]string{{"e", taskID, "root"}, {"e", taskID, "root"}}, taskID},
		"conflicting root":      {[][]string{{"e", taskID, "root"}, {"e", otherID, "root"}}, ""},
		"no role":               {[][]string{{"e", taskID}}, ""},
		"accept role only":      {[][]string{{"e", taskID, "accept"}}, taskID},
		"root wins":             {[][]string{{"e", otherID, "accept"}, {"e", taskID, "root"}}, taskID},
		"bad root, no fallback": {[][]string{{"e", "xyz", "root"}, {"e", taskID, "accept"}}, ""},
		"bad hex":               {[][]string{{"e", strings.ToUpper(taskID), "root"}}, ""},
	}
	for name, tc := range cases {
		if got := TaskRoot(signed(51, "{}", tc.tags...)); got != tc.want {
			t.Errorf("%s: %q", name, got)
		}
	}
}

func TestCheckAcceptPrice(t *testing.T) {
	req := signed(KindTaskRequest, request50, requestTags...) // credit 10, max_cost_usd 0.10
	accept := func(quote string, root string) *Event {
		return signed(KindTaskAccept, `{"price_quote":`+quote+`}`, []string{"e", root, "root"}, []string{"e", root, "accept"}, []string{"p", req.AgentID})
	}
	q := func(currency, amount string) string {
		return `{"currency":"` + currency + `","amount":"` + amount + `"}`
	}
	cases := []struct {
		name       string
		acc        *Event
		want, warn string
	}{
		{"USD below max_cost_usd", accept(q("USD", "0.04"), req.ID), "", ""},
		{"USD equal", accept(q("USD", "0.1"), req.ID), "", ""},
		{"USD above", accept(q("USD", "0.11"), req.ID), CodePriceAboveMax, ""},
		{"USD above, lower-case currency", accept(q("usd", "1"), req.ID), CodePriceAboveMax, ""},
		{"SDK: credit quote as a string, equal to the reward", accept(q("credit", "10"), req.ID), "", ""},
		{"MCP: credit quote as a number", accept(`{"amount":10,"currency":"credit"}`, req.ID), "", ""},
		{"credit below the reward", accept(q("Credit", "3"), req.ID), "", ""},
		{"credit above the reward", accept(q("credit", "1000"), req.ID), CodePriceAboveReward, ""},
		{"another currency is not compared", accept(q("EUR", "1000"), req.ID), "", WarnQuoteUnbounded},
		{"another task", accept(q("USD", "0.01"), otherID), CodeInvalidTaskContent, ""},
		{"malformed accept", signed(KindTaskAccept, "{}", []string{"e", req.ID, "root"}), CodeMissingTag, ""},
		{"no quote", signed(KindTaskAccept, "", []string{"e", req.ID, "accept"}), "", WarnNoQuote},
	}
	for _, tc := range cases {
		w, err := CheckAcceptPrice(tc.acc, req)
		warn := ""
		if w != nil {
			warn = w.Code
		}
		if got := codeOf(err); got != tc.want || warn != tc.warn {
			t.Errorf("%s: code %q warning %q, want %q %q", tc.name, got, warn, tc.want, tc.warn)
		}
	}
	// A request with no USD cap: a USD quote is bounded by a USD reward
	// only.
	noCap := signed(KindTaskRequest, patch(patch(patch(request50, "constraints.max_cost_usd", nil), "reward.currency", "USD"), "reward.payment_method", "mocked"), requestTags...)
	if _, err := CheckAcceptPrice(accept(q("USD", "11"), noCap.ID), noCap); codeOf(err) != CodePriceAboveReward {
		t.Errorf("USD quote above a USD reward with no cap: %v", err)
	}
	if w, err := CheckAcceptPrice(accept(q("USD", "9"), noCap.ID), noCap); err != nil || w != nil {
		t.Errorf("USD quote within a USD reward with no cap: %v %v", w, err)
	}
}

// TestNetworkTaskEventsPassTheRules pins the live network's task events
// (three kind 53 and three kind 54, with no t tag) to the rules.
func TestNetworkTaskEventsPassTheRules(t *testing.T) {
	f, err := os.Open("../testdata/vectors/anp2-network-sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	byKind := map[int64]int{}
	for sc.Scan() {
		e, err := DecodeJSON(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind < KindTaskRequest || e.Kind > KindTaskCancel {
			continue
		}
		byKind[e.Kind]++
		if errs := CheckKind(e); len(errs) > 0 {
			t.Errorf("network event %s (kind %d) rejected: %v", e.ID[:8], e.Kind, errs)
		}
	}
	if byKind[KindTaskVerify] != 3 || byKind[KindPayment] != 3 {
		t.Fatalf("sample holds %v", byKind)
	}
}

// TestTaskRequestLooseShapesRead: the shapes the reference relay accepts
// and the rule takes with a warning are read as the reference relay's
// int() reads them: a fractional credit amount truncated, a string of
// digits as its integer, the quickstart's deadline_at as the deadline.
func TestTaskRequestLooseShapesRead(t *testing.T) {
	for _, c := range []struct {
		raw     string
		credits int64
	}{{"10.5", 10}, {"0.001", 0}, {"1e1", 10}, {`"010"`, 10}, {"9007199254740991.0", 9007199254740991}} {
		e := signed(KindTaskRequest, patchRaw(request50, "reward.amount", raw(c.raw)), requestTags...)
		r, errs := ParseTaskRequest(e)
		if len(errs) > 0 || r.Reward.Credits != c.credits || r.Reward.Amount != strconv.FormatInt(c.credits, 10) {
			t.Errorf("amount %s: %v, credits %d amount %q, want %d", c.raw, errs, r.Reward.Credits, r.Reward.Amount, c.credits)
		}
	}
	e := signed(KindTaskRequest, patch(patch(request50, "constraints.deadline_unix", nil), "deadline_at", 1700000123), requestTags...)
	if r, errs := ParseTaskRequest(e); len(errs) > 0 || r.Deadline != 1700000123 {
		t.Fatalf("deadline_at: %v, deadline %d", errs, r.Deadline)
	}
}
