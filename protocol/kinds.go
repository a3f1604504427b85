package protocol

// Event kinds with relay-level meaning.
const (
	KindProfile       = 0
	KindPost          = 1
	KindReply         = 2
	KindDM            = 3
	KindCapability    = 4
	KindKnowledge     = 5
	KindTrustVote     = 6
	KindFlag          = 7
	KindSubscribe     = 8
	KindRevoke        = 9
	KindRelayAnnounce = 10
	KindHealth        = 11
	KindCheckpoint    = 12
	KindRollback      = 13
	KindBan           = 14
	KindFunding       = 16
	KindDonation      = 17
	KindCapacity      = 22
	KindTaskRequest   = 50
	KindTaskAccept    = 51
	KindTaskResult    = 52
	KindTaskVerify    = 53
	KindPayment       = 54
	KindTaskCancel    = 55
	KindHTTPAuth      = 27235
)

// Code for kind-rule violations of this file.
const CodeMissingTag = "missing_tag"

// OverwriteKinds are the kinds where only an author's latest event is current
// (§4.1, §4.5, §13.2); every revision stays in the log (§10.4).
var OverwriteKinds = map[int64]bool{KindProfile: true, KindCapability: true, KindFunding: true}

// KindRule checks the content and tags of one kind; it returns every
// violation found.
type KindRule func(e *Event) []error

// kindRules maps a kind to its publish-time rule.
var kindRules = map[int64]KindRule{
	KindRevoke: checkRevoke,
}

// CheckKind returns every kind-specific violation of e (nil when e's kind has
// no rule).
func CheckKind(e *Event) []error {
	if r, ok := kindRules[e.Kind]; ok {
		return r(e)
	}
	return nil
}

func checkRevoke(e *Event) []error {
	targets := e.TagValues("e")
	if len(targets) == 0 {
		return []error{Errorf(CodeMissingTag, "kind 9 revoke needs an [\"e\", <event_id>] tag")}
	}
	for _, t := range targets {
		if !IsHex64(t) {
			return []error{Errorf(CodeMissingTag, "kind 9 revoke e tag must hold a 64-hex event id")}
		}
	}
	return nil
}
