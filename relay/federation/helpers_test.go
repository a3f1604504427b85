package federation

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks/taskstest"
)

// vectorTime is the relays' clock; corpusBase is where the random corpora
// begin.
const (
	vectorTime = relaytest.VectorTime
	corpusBase = vectorTime - 3600
)

// testRelay is a real relay on loopback running the federation module.
type testRelay struct {
	*relaytest.Relay
	fed *Module
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

// startRelay runs a relay with federation configured by opts (and its
// default limits where opts leaves them at zero), its core config changed
// by tweak.
func startRelay(t *testing.T, opts Options, tweak ...func(*relay.Config)) *testRelay {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "relay.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return startOn(t, st, opts, tweak...)
}

func startOn(t *testing.T, st *sqlite.Store, opts Options, tweak ...func(*relay.Config)) *testRelay {
	t.Helper()
	fed, err := NewModule(opts)
	if err != nil {
		t.Fatal(err)
	}
	// Mounted without its Run (no announcement, no mirror loop): the
	// tests drive mirroring themselves.
	mounted := struct{ relay.Module }{fed}
	return &testRelay{Relay: relaytest.On(t, st, []relay.Module{mounted}, tweak...), fed: fed}
}

// peerRelay is a relay with its own key, serving on loopback; its
// federation module mirrors.
func peerRelay(t *testing.T, name string) (*testRelay, *Module) {
	t.Helper()
	r := startRelay(t, Options{}, func(c *relay.Config) { c.RelayKey = taskstest.NewAgent("relay-" + name).Key })
	return r, r.fed
}

func (r *testRelay) do(t *testing.T, method, path, ct string, body []byte, hdr ...string) answer {
	t.Helper()
	a := r.Do(t, method, path, ct, body, hdr...)
	return answer{a.Status, a.Header, a.Body}
}

func (r *testRelay) post(t *testing.T, e *protocol.Event) answer {
	t.Helper()
	return r.do(t, "POST", "/events", "application/json", protocol.AppendJSON(nil, e))
}

func (r *testRelay) count(t *testing.T) int64 { t.Helper(); return r.Count(t) }

// state returns the relay's GET /state at at.
func (r *testRelay) state(t *testing.T, at int64) state.Digest {
	t.Helper()
	var d state.Digest
	a := r.Do(t, "GET", "/state?at="+strconv.FormatInt(at, 10), "", nil)
	if a.Status != 200 {
		t.Fatalf("GET /state: %d %s", a.Status, a.Body)
	}
	if err := json.Unmarshal(a.Body, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// publishAll publishes evs to the relay over n concurrent clients.
func publishAll(t *testing.T, r *testRelay, evs []*protocol.Event, n int) {
	t.Helper()
	r.PostAll(t, evs, n)
}
