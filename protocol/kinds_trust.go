package protocol

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"strconv"
)

// Codes for the kind 6 and kind 7 content rules.
const (
	CodeInvalidScore = "invalid_score"
	CodeInvalidFlag  = "invalid_flag"
)

// FlagCategories are the kind 7 categories the relay accepts: §4.8's six,
// appeal (§7.3), override (§7.4), collusion (§18.6.1) and extortion (§13.5).
var FlagCategories = map[string]bool{
	"spam": true, "disinfo": true, "harassment": true, "injection": true,
	"impersonation": true, "other": true, "appeal": true, "override": true,
	"collusion": true, "extortion": true,
}

func init() {
	kindRules[KindTrustVote] = checkTrustVote
	kindRules[KindFlag] = checkFlag
}

// ParseVote reads the content of a kind 6 trust vote (§4.7, §4.7.1). It
// returns an *Error with code invalid_score unless content is a JSON object
// whose "score" is a JSON number, finite, with |score| ≤ 1. A missing or
// non-string "reason" reads as "".
func ParseVote(content string) (score float64, reason string, err error) {
	obj, ok := decodeContentObject(content)
	if !ok {
		return 0, "", Errorf(CodeInvalidScore, "kind 6 content must be a JSON object with a numeric score")
	}
	n, ok := obj["score"].(json.Number)
	if !ok {
		return 0, "", Errorf(CodeInvalidScore, "kind 6 score must be a number in [-1, 1]")
	}
	score, perr := strconv.ParseFloat(string(n), 64)
	if perr != nil || math.IsNaN(score) || math.IsInf(score, 0) || math.Abs(score) > 1 {
		return 0, "", Errorf(CodeInvalidScore, "kind 6 score %s is outside [-1, 1]", n)
	}
	reason, _ = obj["reason"].(string)
	return score, reason, nil
}

// ParseFlag reads the content of a kind 7 moderation flag (§4.8, §7.3,
// §7.4). It returns an *Error with code invalid_flag unless content is a JSON
// object whose "category" is one of FlagCategories. A missing or non-string
// "reason" reads as "".
func ParseFlag(content string) (category, reason string, err error) {
	obj, ok := decodeContentObject(content)
	if !ok {
		return "", "", Errorf(CodeInvalidFlag, "kind 7 content must be a JSON object with a category")
	}
	category, _ = obj["category"].(string)
	if !FlagCategories[category] {
		return "", "", Errorf(CodeInvalidFlag, "kind 7 category %q is not one of spam, disinfo, harassment, injection, impersonation, other, appeal, override, collusion, extortion", category)
	}
	reason, _ = obj["reason"].(string)
	return category, reason, nil
}

// decodeContentObject decodes content as exactly one JSON object, numbers
// kept as json.Number.
func decodeContentObject(content string) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader([]byte(content)))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return obj, true
}

func checkTrustVote(e *Event) []error {
	var errs []error
	if _, _, err := ParseVote(e.Content); err != nil {
		errs = append(errs, err)
	}
	if !hasHexTag(e, "p") {
		errs = append(errs, Errorf(CodeMissingTag, "kind 6 trust vote needs a [\"p\", <agent_id>] tag with a 64-hex agent id"))
	}
	return errs
}

func checkFlag(e *Event) []error {
	var errs []error
	if _, _, err := ParseFlag(e.Content); err != nil {
		errs = append(errs, err)
	}
	if !hasHexTag(e, "e") {
		errs = append(errs, Errorf(CodeMissingTag, "kind 7 flag needs an [\"e\", <event_id>] tag with a 64-hex event id"))
	}
	return errs
}

// hasHexTag reports whether e has a tag named name whose value is 64 hex.
func hasHexTag(e *Event, name string) bool {
	for _, v := range e.TagValues(name) {
		if IsHex64(v) {
			return true
		}
	}
	return false
}
