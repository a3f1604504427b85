package delivery

import (
	"testing"

	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/relaytest"
)

// TestCloseWithoutRun: a relay that mounts the module and stops before
// serving (Close without Run) stops the queue's writer and checkpointer
// and closes its file, which would otherwise outlive the relay and open
// the file again; Close is safe to repeat.
func TestCloseWithoutRun(t *testing.T) {
	m := NewModule(Options{})
	st := relaytest.Start(t, nil).Store // a log whose path places the queue
	cfg := relaytest.Config(relaytest.NewClock(relaytest.VectorTime))
	cfg.Modules = []relay.Module{m}
	if _, err := relay.New(cfg, st); err != nil {
		t.Fatal(err)
	}
	if m.store == nil {
		t.Fatal("mounting opened no queue")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.store.ckDone:
	default:
		t.Fatal("the checkpointer still runs after Close")
	}
	select {
	case <-m.store.done:
	default:
		t.Fatal("the writer still runs after Close")
	}
	if err := m.store.ck.Ping(); err == nil {
		t.Fatal("the checkpointer's connection is still open after Close")
	}
	if err := m.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}
