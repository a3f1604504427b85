package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// BenchmarkQuery times the bench's GET /events shapes on the store: a tag
// (t=) and an author, limit 100, over a log of 60,000 events, plus a read
// by id (Get) and an ids= filter of 10 ids.
func BenchmarkQuery(b *testing.B) {
	ctx := context.Background()
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	recs := benchRecords(60000)
	for i := 0; i < len(recs); i += 512 {
		if _, err := s.AppendBatch(ctx, recs[i:min(i+512, len(recs))]); err != nil {
			b.Fatal(err)
		}
	}
	revoked := func(string) bool { return false }
	var ten []string
	for i := 0; i < 10; i++ {
		ten = append(ten, recs[i*5999].Event.ID)
	}
	for name, f := range map[string]func(i int) error{
		"tag": func(i int) error {
			_, err := s.Query(ctx, Filter{Tags: map[string][]string{"t": {fmt.Sprint("t", i%50)}}, Limit: 100, Revoked: revoked})
			return err
		},
		"author": func(i int) error {
			_, err := s.Query(ctx, Filter{Authors: []string{protocol.AgentIDOf(key(i % 100))}, Limit: 100, Revoked: revoked})
			return err
		},
		"get": func(i int) error {
			_, err := s.Get(ctx, recs[(i*7919)%len(recs)].Event.ID)
			return err
		},
		"ids10": func(i int) error {
			got, err := s.Query(ctx, Filter{IDs: ten, Revoked: revoked})
			if err == nil && len(got) != 10 {
				err = fmt.Errorf("%d events", len(got))
			}
			return err
		},
	} {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := f(i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
