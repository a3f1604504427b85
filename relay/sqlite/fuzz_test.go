package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// FuzzQueryPathsAgree turns fuzz bytes into a filter and requires the four
// ways of answering it to agree: one statement with SQL revocation and two
// steps with the caller's revocation set, each on a log with its indexes and
// on one in the middle of a bulk load (indexes dropped, tags pending).
func FuzzQueryPathsAgree(f *testing.F) {
	ctx := context.Background()
	keys := []string{}
	var evs []*protocol.Event
	revoked := map[string]bool{}
	for i := 0; i < 90; i++ {
		k := key(i % 5)
		tags := [][]string{{"t", fmt.Sprint("t", i%3)}, {"p", protocol.AgentIDOf(key(i % 4))}}
		if i%7 == 0 {
			tags = append(tags, []string{"t", fmt.Sprint("t", i%3)}) // repeated tag
		}
		if i > 0 && i%5 == 0 {
			tags = append(tags, []string{"e", evs[i-5].ID})
		}
		evs = append(evs, ev(k, int64(100+i%30), int64(i%4), fmt.Sprint(i), tags...))
	}
	// Author 1 revokes two of its events and one of author 2's (no effect).
	var targets [][]string
	for _, e := range evs {
		if e.AgentID == protocol.AgentIDOf(key(1)) && len(targets) < 2 {
			targets, revoked[e.ID] = append(targets, []string{"e", e.ID}), true
		}
	}
	targets = append(targets, []string{"e", evs[2].ID})
	evs = append(evs, ev(key(1), 140, 9, "", targets...))
	for i := 0; i < 5; i++ {
		keys = append(keys, protocol.AgentIDOf(key(i)))
	}
	plain, err := Open(filepath.Join(f.TempDir(), "plain.db"), nil)
	if err != nil {
		f.Fatal(err)
	}
	defer plain.Close()
	bulk, err := Open(filepath.Join(f.TempDir(), "bulk.db"), nil)
	if err != nil {
		f.Fatal(err)
	}
	defer bulk.Close()
	if err := bulk.BeginBulk(ctx); err != nil {
		f.Fatal(err)
	}
	for _, s := range []*Store{plain, bulk} {
		for _, e := range evs {
			if _, err := s.Append(ctx, Record{Event: e}); err != nil {
				f.Fatal(err)
			}
		}
	}
	for _, seed := range [][]byte{{}, {1, 2, 3}, {0xff, 0, 7, 9, 200, 3}, []byte("kinds and tags")} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		next := func() int {
			if len(b) == 0 {
				return 0
			}
			v := int(b[0])
			b = b[1:]
			return v
		}
		var flt Filter
		flags := next()
		if flags&1 != 0 {
			flt.Kinds = []int64{int64(next() % 5)}
		}
		if flags&2 != 0 {
			flt.Authors = []string{keys[next()%len(keys)]}
		}
		if flags&4 != 0 {
			flt.Tags = map[string][]string{"t": {fmt.Sprint("t", next()%4)}}
		}
		if flags&8 != 0 {
			if flt.Tags == nil {
				flt.Tags = map[string][]string{}
			}
			flt.Tags["p"] = []string{keys[next()%len(keys)], keys[next()%len(keys)]}
		}
		if flags&16 != 0 {
			since := int64(100 + next()%30)
			flt.Since = &since
		}
		if flags&32 != 0 {
			until := int64(100 + next()%30)
			flt.Until = &until
		}
		if flags&64 != 0 {
			flt.IDs = []string{evs[next()%len(evs)].ID, evs[next()%len(evs)].ID}
			if n := next(); n%2 == 0 { // an id never stored
				flt.IDs[n%4/2] = strings.Repeat(fmt.Sprintf("%02x", next()), 32)
			}
		}
		flt.IncludeRevoked = flags&128 != 0
		flt.Limit = 1 + next()%40
		var answers []string
		for _, s := range []*Store{plain, bulk} {
			for _, g := range []Filter{flt, withRevoked(flt, revoked)} {
				got, err := s.Query(ctx, g)
				if err != nil {
					t.Fatal(err)
				}
				answers = append(answers, strings.Join(ids(t, got), ","))
			}
		}
		for i, a := range answers[1:] {
			if a != answers[0] {
				t.Fatalf("%+v: answer %d differs:\n%s\n%s", flt, i+1, answers[0], a)
			}
		}
	})
}
