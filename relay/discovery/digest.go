package discovery

import (
	"crypto/sha256"
	"encoding/hex"
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
	cites := f.st.digestEdges()
	var subs []string
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

// digestEdges returns every citation edge as the digest's JCS text
// [citing, target, [relations…]], unsorted. Callers hold the fold's read
// lock.
func (s *store) digestEdges() []string {
	if s.empty() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush()
	rows, err := s.tx.Query(`SELECT citing, target, rels FROM cite`)
	if err != nil {
		s.fail(err)
		return nil
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var citing, target []byte
		var rels string
		if err := rows.Scan(&citing, &target, &rels); err != nil {
			s.fail(err)
			return out
		}
		b := []byte{'['}
		b = canonjson.AppendString(b, hex.EncodeToString(citing))
		b = append(b, ',')
		b = canonjson.AppendString(b, hex.EncodeToString(target))
		b = append(b, ",["...)
		for i, r := range strings.Split(rels, ",") {
			if i > 0 {
				b = append(b, ',')
			}
			b = canonjson.AppendString(b, r)
		}
		out = append(out, string(append(b, "]]"...)))
	}
	s.fail(rows.Err())
	return out
}
