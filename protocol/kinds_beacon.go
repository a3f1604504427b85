package protocol

import (
	"encoding/json"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// Rules and parsers for the discovery kinds of seed §12: kind 15 beacons
// (§12.1) and kind 8 subscriptions (§12.7). The relay's publish check and
// the discovery fold share these parsers, so an event the relay accepts is
// an event the fold understands.

// Kinds of seed §12.
const (
	KindBeacon = 15
	// KindCacheInvalidate is seed §12.9.5's cache_invalidate.
	KindCacheInvalidate = 23
)

// Codes for the discovery kinds' content rules.
const (
	CodeInvalidBeacon       = "invalid_beacon"
	CodeInvalidSubscription = "invalid_subscription"
)

// Beacon bounds: a beacon lives ttl_sec seconds after its created_at
// (minutes to hours, §12.1).
const (
	BeaconMinTTL     = 60
	BeaconMaxTTL     = 7 * 86400
	BeaconDefaultTTL = 3600
	beaconAboutMax   = 1024
)

// BeaconUrgencies are the values of a beacon's urgency, lowest first.
var BeaconUrgencies = []string{"low", "normal", "high", "critical"}

var intentRe = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,31}$`)

// Beacon is the content of a kind 15 event.
type Beacon struct {
	Intent  string `json:"intent"`
	About   string `json:"about"`
	TTLSec  int64  `json:"ttl_sec"`
	Urgency string `json:"urgency"`
}

func init() {
	kindRules[KindBeacon] = checkBeacon
	kindRules[KindSubscribe] = checkSubscribe
	kindRules[KindCacheInvalidate] = checkCacheInvalidate
}

// checkCacheInvalidate is seed §12.9.5's kind 23: content empty or a JSON
// object (its reason, when present, a string), and at least one
// ["e", <64-hex>] tag naming what changed.
func checkCacheInvalidate(e *Event) []error {
	var errs []error
	if e.Content != "" {
		obj, ok := decodeContentObject(e.Content)
		if _, isStr := obj["reason"].(string); !ok || obj["reason"] != nil && !isStr {
			errs = append(errs, Errorf(CodeInvalidTag, "kind 23 content must be empty or a JSON object whose reason is a string"))
		}
	}
	ids := e.TagValues("e")
	if len(ids) == 0 {
		return append(errs, Errorf(CodeMissingTag, "kind 23 cache_invalidate needs an [\"e\", <event_id>] tag"))
	}
	for _, id := range ids {
		if !IsHex64(id) {
			return append(errs, Errorf(CodeMissingTag, "kind 23 e tag must hold a 64-hex event id"))
		}
	}
	return errs
}

// ParseBeacon reads the content of a kind 15 beacon. Content is a JSON
// object with intent (a lowercase token: letter, then up to 31 of a-z 0-9
// _ . -; e.g. seek, offer, help, introduce), about (non-empty, at most 1024
// bytes of UTF-8), ttl_sec (optional integer in [60, 604800], default 3600)
// and urgency (optional, one of BeaconUrgencies, default normal). It
// returns an *Error with code invalid_beacon naming the first bad field.
func ParseBeacon(content string) (Beacon, error) {
	b := Beacon{TTLSec: BeaconDefaultTTL, Urgency: "normal"}
	obj, ok := decodeContentObject(content)
	if !ok {
		return b, Errorf(CodeInvalidBeacon, "kind 15 content must be a JSON object with intent and about")
	}
	if b.Intent, ok = obj["intent"].(string); !ok || !intentRe.MatchString(b.Intent) {
		return b, Errorf(CodeInvalidBeacon, "kind 15 intent must be a lowercase token such as \"seek\" (a letter, then up to 31 of a-z 0-9 _ . -)")
	}
	if b.About, ok = obj["about"].(string); !ok || b.About == "" || len(b.About) > beaconAboutMax || !utf8.ValidString(b.About) {
		return b, Errorf(CodeInvalidBeacon, "kind 15 about must be a non-empty string of at most %d bytes", beaconAboutMax)
	}
	if raw, present := obj["ttl_sec"]; present {
		n, isNum := raw.(json.Number)
		ttl, err := strconv.ParseInt(string(n), 10, 64)
		if !isNum || err != nil || ttl < BeaconMinTTL || ttl > BeaconMaxTTL {
			return b, Errorf(CodeInvalidBeacon, "kind 15 ttl_sec must be an integer from %d to %d", BeaconMinTTL, BeaconMaxTTL)
		}
		b.TTLSec = ttl
	}
	if raw, present := obj["urgency"]; present {
		u, _ := raw.(string)
		if UrgencyRank(u) < 0 {
			return b, Errorf(CodeInvalidBeacon, "kind 15 urgency must be one of low, normal, high, critical")
		}
		b.Urgency = u
	}
	return b, nil
}

// UrgencyRank is u's index in BeaconUrgencies, or -1.
func UrgencyRank(u string) int {
	for i, v := range BeaconUrgencies {
		if v == u {
			return i
		}
	}
	return -1
}

func checkBeacon(e *Event) []error {
	var errs []error
	if _, err := ParseBeacon(e.Content); err != nil {
		errs = append(errs, err)
	}
	if len(e.TagValues("t")) == 0 && len(e.TagValues("cap_wanted")) == 0 {
		errs = append(errs, Errorf(CodeMissingTag, "kind 15 beacon needs a [\"t\", <topic>] or [\"cap_wanted\", <capability>] tag to be delivered"))
	}
	return errs
}

// Subscription is the content of a kind 8 event.
type Subscription struct {
	Reason string `json:"reason"`
	// Withdraw ends the follows the event names.
	Withdraw bool `json:"withdraw"`
}

// ParseSubscription reads the content of a kind 8 subscription (§12.7):
// empty, or a JSON object whose optional reason is a string and whose
// optional withdraw is a boolean (true ends the follows of the event's
// tags). It returns an *Error with code invalid_subscription otherwise.
func ParseSubscription(content string) (Subscription, error) {
	var s Subscription
	if content == "" {
		return s, nil
	}
	obj, ok := decodeContentObject(content)
	if !ok {
		return s, Errorf(CodeInvalidSubscription, "kind 8 content must be empty or a JSON object")
	}
	if raw, present := obj["reason"]; present {
		if s.Reason, ok = raw.(string); !ok {
			return s, Errorf(CodeInvalidSubscription, "kind 8 reason must be a string")
		}
	}
	if raw, present := obj["withdraw"]; present {
		if s.Withdraw, ok = raw.(bool); !ok {
			return s, Errorf(CodeInvalidSubscription, "kind 8 withdraw must be true or false")
		}
	}
	return s, nil
}

func checkSubscribe(e *Event) []error {
	var errs []error
	if _, err := ParseSubscription(e.Content); err != nil {
		errs = append(errs, err)
	}
	ps, ts := e.TagValues("p"), e.TagValues("t")
	if len(ps) == 0 && len(ts) == 0 {
		errs = append(errs, Errorf(CodeMissingTag, "kind 8 subscription needs a [\"p\", <agent_id>] or [\"t\", <topic>] tag"))
	}
	for _, p := range ps {
		if !IsHex64(p) {
			errs = append(errs, Errorf(CodeInvalidTag, "kind 8 p tag must hold a 64-hex agent_id"))
			break
		}
	}
	for _, t := range ts {
		if t == "" {
			errs = append(errs, Errorf(CodeInvalidTag, "kind 8 t tag must not be empty"))
			break
		}
	}
	return errs
}
