package postgres

import (
	"context"
	"os"
	"testing"

	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/eventlog/logtest"
	"github.com/anp2net/relay/relay/postgres/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// open opens a log on a fresh database of the test server.
func open(t *testing.T, url string, hook func([]eventlog.Committed)) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, hook)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformance runs the eventlog conformance suite on a real server.
func TestConformance(t *testing.T) {
	logtest.Run(t, func(t *testing.T, hook func([]eventlog.Committed)) eventlog.Log {
		return open(t, pgtest.DB(t), hook)
	})
}
