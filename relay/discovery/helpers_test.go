package discovery_test

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

func start(t *testing.T) (*relaytest.Relay, *discovery.Module) {
	t.Helper()
	m := discovery.NewModule()
	return relaytest.Start(t, []relay.Module{m}), m
}

// get answers GET path (with extra header pairs) decoded into out, and
// fails unless it is a 200.
func get(t *testing.T, r *relaytest.Relay, path string, out any, hdr ...string) relaytest.Answer {
	t.Helper()
	ans := r.Do(t, "GET", path, "", nil, hdr...)
	if ans.Status != 200 {
		t.Fatalf("GET %s: %d %s", path, ans.Status, ans.Body)
	}
	reflect.ValueOf(out).Elem().SetZero()
	if err := json.Unmarshal(ans.Body, out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return ans
}

// refuse requires GET path to answer status with code.
func refuse(t *testing.T, r *relaytest.Relay, path string, status int, code string) {
	t.Helper()
	ans := r.Do(t, "GET", path, "", nil)
	if ans.Status != status || ans.Code(t) != code {
		t.Fatalf("GET %s: %d %s, want %d %s", path, ans.Status, ans.Body, status, code)
	}
}

// sealedDM is a kind 3 from one agent to another in the shape the relay
// accepts (a nonce and a sealed box of 16 + 32 bytes; the relay never opens
// it), with extra tags.
func sealedDM(from taskstest.Agent, to string, at int64, extra ...[]string) *protocol.Event {
	tags := append([][]string{{"p", to}, {"nonce", strings.Repeat("ab", 24)}}, extra...)
	return from.Sign(protocol.KindDM, at, base64.StdEncoding.EncodeToString(make([]byte, 48)), tags...)
}

func idx(pool []taskstest.Agent, id string) int {
	for i, a := range pool {
		if a.ID == id {
			return i
		}
	}
	return -1
}
