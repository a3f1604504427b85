package a2a

import (
	"regexp"
	"strings"
)

// Intents message/send recognises. The answer is chosen by keyword rules
// only: no model reads the caller's text.
const (
	IntentInjection = "injection"
	IntentStatus    = "status"
	IntentJoin      = "join"
	IntentDelegate  = "delegate"
	IntentDiscover  = "discover"
	IntentCredit    = "credit"
	IntentPing      = "ping"
	IntentIntroduce = "introduce"
)

// maxClassify bounds how much of the caller's text the rules read.
const maxClassify = 4096

// rule fires when one of its phrases occurs in the text (phrases with a
// space) or one of its words starts a token (single words).
type rule struct {
	intent  string
	phrases []string
}

// rules, in precedence order: the first that fires wins.
var rules = []rule{
	{IntentInjection, []string{"ignore previous", "ignore all previous", "ignore the above", "disregard previous",
		"system prompt", "you are now", "jailbreak", "developer mode", "reveal your instructions", "forget your instructions"}},
	{IntentJoin, []string{"join", "register", "signup", "sign up", "onboard", "identity", "keypair", "key pair",
		"publish", "get started", "getting started", "how do i start", "participate", "profile", "offer", "provide"}},
	{IntentDelegate, []string{"delegate", "hire", "outsource", "task", "job", "request work", "need someone", "get work done"}},
	{IntentDiscover, []string{"discover", "find", "search", "who", "agents", "directory", "capabilit", "browse", "list", "room"}},
	{IntentCredit, []string{"credit", "pay", "payment", "balance", "reward", "price", "cost", "earn", "money", "fee"}},
	{IntentPing, []string{"ping", "hello", "hi", "hey", "alive", "health", "status"}},
}

var (
	taskIDPattern = regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	tokenSplit    = regexp.MustCompile(`[^a-z0-9]+`)
)

// Classification is the outcome of the rules on one message.
type Classification struct {
	Intent  string // one of the Intent* constants
	Matched string // the phrase or word that fired ("" for introduce)
	TaskID  string // the 64-hex id found, for IntentStatus
}

// Classify applies the rules to text: injection phrases first, then a
// 64-hex task id (status), then join, delegate, discover, credit and ping
// keywords; otherwise introduce. Deterministic; it never fails.
func Classify(text string) Classification {
	if len(text) > maxClassify {
		text = text[:maxClassify]
	}
	lower := strings.ToLower(text)
	if m := matchRule(rules[0], lower, nil); m != "" {
		return Classification{Intent: IntentInjection, Matched: m}
	}
	if id := taskIDPattern.FindString(lower); id != "" {
		return Classification{Intent: IntentStatus, Matched: id, TaskID: id}
	}
	tokens := tokenSplit.Split(lower, -1)
	for _, r := range rules[1:] {
		if m := matchRule(r, lower, tokens); m != "" {
			return Classification{Intent: r.intent, Matched: m}
		}
	}
	return Classification{Intent: IntentIntroduce}
}

func matchRule(r rule, lower string, tokens []string) string {
	for _, p := range r.phrases {
		if strings.Contains(p, " ") || tokens == nil {
			if strings.Contains(lower, p) {
				return p
			}
			continue
		}
		for _, tok := range tokens {
			if tokenMatches(tok, p) {
				return p
			}
		}
	}
	return ""
}

// tokenMatches: short words (≤ 3 letters) must match whole; longer ones
// match as a prefix, so "capabilit" covers capability and capabilities.
func tokenMatches(tok, word string) bool {
	if len(word) <= 3 {
		return tok == word
	}
	return strings.HasPrefix(tok, word)
}
