package main

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/anp2net/relay/relay/governance"
)

// govFlags are the operator's governance keys (SPEC §10.1). serve and
// replay take the same flags (and ANP2_SEED_KEYS, ANP2_SEED_THRESHOLD,
// ANP2_SOVEREIGN_KEYS, ANP2_SOVEREIGN_THRESHOLD, ANP2_SEED_FREEZE_TTL), so
// an auditor derives the governance state the relay serves.
type govFlags struct {
	seedKeys, sovKeys           string
	seedThreshold, sovThreshold int
	seedTTL, deadMan            time.Duration
	pqKeys                      string
}

func (g *govFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&g.seedKeys, "seed-keys", "", "comma-separated agent_ids of the seed multisig (emergency freeze, §11.6)")
	fs.IntVar(&g.seedThreshold, "seed-threshold", 0, "seed keys that must sign an act (0 = a majority)")
	fs.StringVar(&g.sovKeys, "sovereign-keys", "", "comma-separated agent_ids of the sovereign override keys (§15)")
	fs.IntVar(&g.sovThreshold, "sovereign-threshold", 0, "sovereign keys that must sign an act (0 = a majority)")
	fs.DurationVar(&g.seedTTL, "seed-freeze-ttl", 24*time.Hour, "how long a seed-key freeze lasts unless renewed")
	fs.DurationVar(&g.deadMan, "dead-man-after", 365*24*time.Hour, "sovereign dormancy after which the stewards' kind 31 transfers authority")
	fs.StringVar(&g.pqKeys, "pq-keys", "", "JSON file mapping seed or sovereign agent_ids to their ML-DSA-65 public keys (hex): those keys must dual-sign")
}

// options returns the governance options, or an error for an unreadable
// post-quantum key file.
func (g *govFlags) options() (governance.Options, error) {
	split := func(s string) []string {
		if strings.TrimSpace(s) == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	o := governance.Options{
		SeedKeys: split(g.seedKeys), SeedThreshold: g.seedThreshold,
		SovereignKeys: split(g.sovKeys), SovereignThreshold: g.sovThreshold,
		SeedFreezeTTL: int64(g.seedTTL / time.Second), DeadManAfter: int64(g.deadMan / time.Second),
	}
	if g.pqKeys == "" {
		return o, nil
	}
	b, err := os.ReadFile(g.pqKeys)
	if err != nil {
		return o, fmt.Errorf("pq keys: %w", err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return o, fmt.Errorf("pq keys %s: want a JSON object of agent_id to hex key: %w", g.pqKeys, err)
	}
	o.PQKeys = map[string][]byte{}
	for id, h := range m {
		if o.PQKeys[id], err = hex.DecodeString(h); err != nil {
			return o, fmt.Errorf("pq key of %s: %w", id, err)
		}
	}
	return o, nil
}
