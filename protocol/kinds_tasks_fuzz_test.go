package protocol

import (
	"strings"
	"testing"
)

// FuzzTaskRules feeds the task parsers (kinds 50–55) arbitrary content
// under each tag shape the network's clients use, and a request against
// which an accept's price is judged. The rules never panic; an event the
// rule accepts names its task and has only well-formed warnings; a
// rejected one has none; the price rule answers a violation or a warning,
// never both.
func FuzzTaskRules(f *testing.F) {
	for _, c := range []string{request50, "", "{}", `{"price_quote":{"currency":"credit","amount":"10"}}`,
		`{"price_quote":{"amount":10,"currency":"credit"}}`, `{"output":"x"}`, `{"capability":"c","input":{},"constraints":{"deadline_sec":600},"reward":{"currency":"USD","amount":0}}`,
		`{"task_id":"` + taskID + `","verdict":"passed","score":1.0}`, `{"disposition":"release","payment_method":"anp2_credit","amount":"10"}`,
		`{"constraints":{"deadline_sec":99999999999999999999}}`, `{"price_quote":{"currency":"EUR","amount":"1e400"}}`} {
		for kind := int64(50); kind <= 55; kind++ {
			f.Add(kind, c, uint8(kind))
		}
	}
	req := signed(KindTaskRequest, request50, requestTags...)
	shapes := [][][]string{
		lifecycleTags("root", "accept", "result", "verify", "payment", "cancel"),
		{{"e", taskID, "accept"}}, {{"e", taskID, "result"}}, {{"e", taskID, "verify"}},
		{{"e", taskID, "payment"}}, {{"e", taskID, "cancel"}}, {{"t", "task"}, {"cap", "c"}},
		{{"e", "zz", "root"}, {"p", "x"}}, requestTags, nil,
	}
	f.Fuzz(func(t *testing.T, kind int64, content string, shape uint8) {
		if kind < KindTaskRequest || kind > KindTaskCancel {
			return
		}
		tags := shapes[int(shape)%len(shapes)]
		if kind == KindTaskAccept && shape%2 == 0 {
			tags = [][]string{{"e", req.ID, "root"}, {"e", req.ID, "accept"}}
		}
		e := &Event{CreatedAt: 1763800000, Kind: kind, Tags: tags, Content: content}
		errs, warns := CheckKind(e), KindWarnings(e)
		if len(errs) > 0 && len(warns) > 0 {
			t.Fatalf("rejected with warnings: %v %v", errs, warns)
		}
		for _, w := range warns {
			if w.Code == "" || strings.TrimSpace(w.Detail) == "" {
				t.Fatalf("empty warning %+v", w)
			}
		}
		if len(errs) == 0 && kind != KindTaskRequest && TaskRoot(e) == "" {
			t.Fatalf("an accepted kind %d names no task: %v", kind, tags)
		}
		if kind == KindTaskAccept && len(errs) == 0 {
			e.AgentID = req.AgentID
			w, err := CheckAcceptPrice(e, req)
			if w != nil && err != nil {
				t.Fatalf("price rule: both %v and %v", w, err)
			}
		}
	})
}
