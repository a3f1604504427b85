package postgres

import (
	"context"
	"fmt"
	"testing"

	"github.com/anp2net/relay/relay/postgres/pgtest"
)

// TestA2ATasksSharedAndBounded: a task one store writes, another store on
// the same database reads; the table keeps about a2aTaskRows tasks, the
// newest, and refuses a body over a2aTaskBytes.
func TestA2ATasksSharedAndBounded(t *testing.T) {
	url := pgtest.DB(t)
	a, b := open(t, url, nil), open(t, url, nil)
	ctx := context.Background()
	n := a2aTaskRows + 2*a2aPruneEvery
	for i := range n {
		if err := a.PutA2ATask(ctx, fmt.Sprintf("task-%05d", i), []byte(`{"n":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	if body, ok, err := b.GetA2ATask(ctx, fmt.Sprintf("task-%05d", n-1)); err != nil || !ok || string(body) != `{"n":1}` {
		t.Fatalf("newest task through the other store: %q %v %v", body, ok, err)
	}
	if _, ok, err := b.GetA2ATask(ctx, "task-00000"); err != nil || ok {
		t.Fatalf("the oldest task survived the bound: %v %v", ok, err)
	}
	var rows int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM a2a_tasks`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows > a2aTaskRows+a2aPruneEvery {
		t.Fatalf("a2a_tasks holds %d rows; bound %d (+%d between prunes)", rows, a2aTaskRows, a2aPruneEvery)
	}
	if err := a.PutA2ATask(ctx, "big", make([]byte, a2aTaskBytes+1)); err == nil {
		t.Fatal("a body over the bound was stored")
	}
}
