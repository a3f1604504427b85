package protocol

import "testing"

// TestCheckStored: a stored event is judged on limits, id, signature and
// PoW, never on its kind's content rule; the batch answers as one at a
// time.
func TestCheckStored(t *testing.T) {
	lenient := DefaultChecker()
	lenient.PoW.Kinds = nil
	lenient.Limits.MaxAge = 0
	strict := lenient
	strict.PoW = DefaultPoWPolicy()
	strict.PoW.ActiveFrom = 0
	forged := *signed(KindPost, "original")
	forged.Sig = signed(KindPost, "other").Sig
	cases := []struct {
		name    string
		c       Checker
		e       *Event
		publish string // CheckFirst's code
		stored  string // CheckStored's code
	}{
		{"vote with score 5", lenient, signed(KindTrustVote, `{"score":5}`, []string{"p", otherID}), CodeInvalidScore, ""},
		{"garbage kind 50", lenient, signed(KindTaskRequest, `"translate"`), CodeInvalidTaskContent, ""},
		{"revoke without target", lenient, signed(KindRevoke, ""), CodeMissingTag, ""},
		{"forged signature", lenient, &forged, CodeBadSignature, CodeBadSignature},
		{"PoW still required", strict, signed(KindTaskRequest, `"translate"`), CodePoWRequired, CodePoWRequired},
		{"valid post", lenient, signed(KindPost, "hi"), "", ""},
	}
	evs := make([]*Event, len(cases))
	for i, tc := range cases {
		if got := codeOf(tc.c.CheckFirst(tc.e, 1763800000)); got != tc.publish {
			t.Errorf("%s: CheckFirst %q, want %q", tc.name, got, tc.publish)
		}
		if got := codeOf(tc.c.CheckStored(tc.e, 1763800000)); got != tc.stored {
			t.Errorf("%s: CheckStored %q, want %q", tc.name, got, tc.stored)
		}
		evs[i] = tc.e
	}
	errs := make([]error, len(evs))
	lenient.CheckStoredBatch(evs, 1763800000, errs)
	for i, tc := range cases {
		if tc.c.PoW.Kinds != nil {
			continue
		}
		if got := codeOf(errs[i]); got != tc.stored {
			t.Errorf("%s: CheckStoredBatch %q, want %q", tc.name, got, tc.stored)
		}
	}
}
