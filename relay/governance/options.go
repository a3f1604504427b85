package governance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cloudflare/circl/sign/mldsa/mldsa65"
)

// Governance kinds (seed §14.1, §14.7, §15.2, §15.4).
const (
	KindPIP          = 20
	KindSeedDestruct = 21
	KindSovereignAct = 30
	KindDeadMan      = 31
)

// DefaultSeedFreezeTTL is how long a seed-key freeze lasts unless renewed
// (seed §11.6: "request AI consensus restart within 24h").
const DefaultSeedFreezeTTL = 24 * 3600

// Options are the operator's governance settings: the seed multisig
// (§11.6, §14.7) and the sovereign override keys (§15.3). Every relay of a
// network, and the auditor's replay, must use the same ones to derive the
// same state; GET /state's governance view covers them.
type Options struct {
	// SeedKeys are the seed multisig's agent_ids; SeedThreshold of them
	// must sign (0: a majority, 2-of-3, 3-of-5).
	SeedKeys      []string
	SeedThreshold int
	// SovereignKeys are the sovereign override keys; SovereignThreshold of
	// them must sign (0: a majority).
	SovereignKeys      []string
	SovereignThreshold int
	// SeedFreezeTTL is the life of a seed-key freeze in seconds (0:
	// DefaultSeedFreezeTTL).
	SeedFreezeTTL int64
	// PQKeys maps a seed or sovereign agent_id to its ML-DSA-65 public key
	// (FIPS 204 encoding): such a key counts as a signer only when its
	// Ed25519 and its post-quantum signatures both verify (§15.3).
	PQKeys map[string][]byte
	// DeadManAfter is the sovereign dormancy in seconds after which the
	// stewards' kind 31 transfers authority (0: DefaultDeadManAfter).
	DeadManAfter int64

	pqPub map[string]*mldsa65.PublicKey
}

// normalize checks opts and fills defaults: keys are 64 lowercase hex,
// distinct and sorted; a threshold is between 1 and the number of keys.
func (o Options) normalize() (Options, error) {
	var err error
	if o.SeedKeys, o.SeedThreshold, err = keySet("seed", o.SeedKeys, o.SeedThreshold); err != nil {
		return o, err
	}
	if o.SovereignKeys, o.SovereignThreshold, err = keySet("sovereign", o.SovereignKeys, o.SovereignThreshold); err != nil {
		return o, err
	}
	if o.SeedFreezeTTL == 0 {
		o.SeedFreezeTTL = DefaultSeedFreezeTTL
	}
	if o.DeadManAfter == 0 {
		o.DeadManAfter = DefaultDeadManAfter
	}
	if o.SeedFreezeTTL < 0 || o.DeadManAfter < 0 {
		return o, fmt.Errorf("seed freeze TTL %d, dead-man period %d: must be positive", o.SeedFreezeTTL, o.DeadManAfter)
	}
	return o, o.parsePQKeys()
}

func keySet(name string, keys []string, threshold int) ([]string, int, error) {
	var out []string
	for _, k := range keys {
		for _, part := range strings.Split(k, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			if !isHex64(part) {
				return nil, 0, fmt.Errorf("%s key %q: want 64 lowercase hex", name, part)
			}
			if slices.Contains(out, part) {
				return nil, 0, fmt.Errorf("%s key %s given twice", name, part)
			}
			out = append(out, part)
		}
	}
	slices.Sort(out)
	if threshold == 0 && len(out) > 0 {
		threshold = len(out)/2 + 1
	}
	if len(out) > 0 && (threshold < 1 || threshold > len(out)) {
		return nil, 0, fmt.Errorf("%s threshold %d: want 1..%d", name, threshold, len(out))
	}
	if len(out) == 0 && threshold != 0 {
		return nil, 0, fmt.Errorf("%s threshold %d without %s keys", name, threshold, name)
	}
	return out, threshold, nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
