package main

import (
	"flag"
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
	seedTTL                     time.Duration
}

func (g *govFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&g.seedKeys, "seed-keys", "", "comma-separated agent_ids of the seed multisig (emergency freeze, §11.6)")
	fs.IntVar(&g.seedThreshold, "seed-threshold", 0, "seed keys that must sign an act (0 = a majority)")
	fs.StringVar(&g.sovKeys, "sovereign-keys", "", "comma-separated agent_ids of the sovereign override keys (§15)")
	fs.IntVar(&g.sovThreshold, "sovereign-threshold", 0, "sovereign keys that must sign an act (0 = a majority)")
	fs.DurationVar(&g.seedTTL, "seed-freeze-ttl", 24*time.Hour, "how long a seed-key freeze lasts unless renewed")
}

func (g *govFlags) options() governance.Options {
	split := func(s string) []string {
		if strings.TrimSpace(s) == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	return governance.Options{
		SeedKeys: split(g.seedKeys), SeedThreshold: g.seedThreshold,
		SovereignKeys: split(g.sovKeys), SovereignThreshold: g.sovThreshold,
		SeedFreezeTTL: int64(g.seedTTL / time.Second),
	}
}
