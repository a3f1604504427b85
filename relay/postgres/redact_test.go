package postgres

import (
	"context"
	"testing"

	"github.com/anp2net/relay/relay/eventlog/logtest"
	"github.com/anp2net/relay/relay/postgres/pgtest"
)

// TestRedact runs the redaction checks on a real server, across a second
// store over the same database; Serving counts that store's listener.
func TestRedact(t *testing.T) {
	url := pgtest.DB(t)
	s := open(t, url, nil)
	logtest.CheckRedact(t, s, func() logtest.Redactor { return open(t, url, nil) })
	if n, err := Serving(context.Background(), url); err != nil || n < 1 {
		t.Fatalf("Serving = %d, %v with two stores open", n, err)
	}
}
