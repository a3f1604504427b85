package reference

import (
	"crypto/sha256"
	"sort"
	"strings"

	"github.com/anp2net/relay/protocol/canonjson"
)

// Digest hashes the judgements of the fold, which depend only on the set of
// folded events (D6): the JCS form of
// {"citations": [[citing, target, [relations…]], …] sorted,
// "subscriptions": [[follower, target_type, target, event_id, withdrawn], …]
// sorted}. Beacons, co-presence, neighbours and feeds are evaluations at
// query time and are not part of it; at is unused.
func (f *Fold) Digest(at int64) [32]byte {
	f.mu.RLock()
	var cites, subs []string
	for _, edges := range f.cites.outgoing {
		for _, e := range edges {
			b := []byte{'['}
			b = canonjson.AppendString(b, e.Citing)
			b = append(b, ',')
			b = canonjson.AppendString(b, e.Target)
			b = append(b, ",["...)
			for i, r := range e.Relations {
				if i > 0 {
					b = append(b, ',')
				}
				b = canonjson.AppendString(b, r)
			}
			cites = append(cites, string(append(b, "]]"...)))
		}
	}
	for follower, pairs := range f.subs.byFollower {
		for k, evs := range pairs {
			fl := decide(follower, k, evs)
			b := []byte{'['}
			for _, s := range []string{fl.Follower, fl.TargetType, fl.Target, fl.EventID} {
				b = canonjson.AppendString(b, s)
				b = append(b, ',')
			}
			if fl.Withdrawn {
				b = append(b, "true]"...)
			} else {
				b = append(b, "false]"...)
			}
			subs = append(subs, string(b))
		}
	}
	f.mu.RUnlock()
	sort.Strings(cites)
	sort.Strings(subs)
	doc := `{"citations":[` + strings.Join(cites, ",") + `],"subscriptions":[` + strings.Join(subs, ",") + `]}`
	return sha256.Sum256([]byte(doc))
}
