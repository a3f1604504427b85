package ws_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/ws"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/coder/websocket"
)

// dialFrom opens /ws as the client at ip behind a trusted loopback proxy;
// it returns the HTTP status of the refusal, or 101 and the connection.
func dialFrom(t *testing.T, url, ip string) (int, *websocket.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"X-Forwarded-For": {ip}}})
	if err != nil {
		if resp == nil {
			t.Fatalf("dial as %s: %v", ip, err)
		}
		return resp.StatusCode, nil
	}
	t.Cleanup(func() { c.CloseNow() })
	return http.StatusSwitchingProtocols, c
}

// TestConnectionCapKeysIPv6ByPrefix: the per-address connection cap
// counts the addresses of one IPv6 /64 as one client, so rotating
// addresses cannot take every slot; another /64 has its own.
func TestConnectionCapKeysIPv6ByPrefix(t *testing.T) {
	r, _ := start(t, ws.Options{}, func(c *relay.Config) {
		c.MaxStreamsPerIP, c.TrustedProxies = 2, []string{"127.0.0.1/32"}
	})
	for i, ip := range []string{"2001:db8:5:6::1", "2001:db8:5:6::2"} {
		if st, _ := dialFrom(t, r.URL, ip); st != http.StatusSwitchingProtocols {
			t.Fatalf("connection %d of the /64: %d", i, st)
		}
	}
	if st, _ := dialFrom(t, r.URL, "2001:db8:5:6:ffff::3"); st != http.StatusTooManyRequests {
		t.Fatalf("third connection of one /64 from a fresh address: %d, want 429", st)
	}
	if st, _ := dialFrom(t, r.URL, "2001:db8:5:7::1"); st != http.StatusSwitchingProtocols {
		t.Fatalf("a connection from another /64: %d", st)
	}
}

// TestAuthFrameBoundAndSingleUse: an AUTH event signed for another relay
// is refused (auth_wrong_relay) on a connection whose Host header names
// that relay, and an AUTH accepted once is refused when sent again
// (auth_replayed), on the same connection or another.
func TestAuthFrameBoundAndSingleUse(t *testing.T) {
	r, _ := start(t, ws.Options{})
	a := taskstest.Pool(1)[0]
	frame := func(url string) string {
		raw, err := base64Decode(strings.TrimPrefix(protocol.HTTPAuth(a.Key, "GET", url, nil, vt), "ANP2 "))
		if err != nil {
			t.Fatal(err)
		}
		return `["AUTH",` + string(raw) + `]`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	spoofed, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(r.URL, "http")+"/ws",
		&websocket.DialOptions{Host: "relay.other.example"})
	if err != nil {
		t.Fatal(err)
	}
	defer spoofed.CloseNow()
	c := &client{t: t, c: spoofed, ctx: ctx}
	c.sendRaw(frame("ws://relay.other.example/ws"))
	if f := c.expect("OK"); string(f[2]) != "false" || !strings.HasPrefix(str(f[3]), relay.CodeAuthWrongRelay+":") {
		t.Fatalf("AUTH for another relay: %s", join(f))
	}

	good := frame("ws" + strings.TrimPrefix(r.URL, "http") + "/ws")
	first := dial(t, r)
	first.sendRaw(good)
	if f := first.expect("OK"); string(f[2]) != "true" {
		t.Fatalf("AUTH: %s", join(f))
	}
	for _, cl := range []*client{first, dial(t, r)} {
		cl.sendRaw(good)
		if f := cl.expect("OK"); string(f[2]) != "false" || !strings.HasPrefix(str(f[3]), relay.CodeAuthReplayed+":") {
			t.Fatalf("AUTH sent again: %s", join(f))
		}
	}
}
