package client_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/tlog"
)

// ProveInclusion checks a relay's proofs against its signed checkpoint:
// every published event is proved; a checkpoint under another key, and a
// proof for another entry, are refused.
func TestProveInclusion(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{tlog.NewModule(tlog.Options{})}, func(c *relay.Config) {
		c.RelayKey = ed25519.NewKeyFromSeed(make([]byte, 32))
		c.Logger = slog.New(slog.DiscardHandler)
	})
	c := agentOn(t, r)
	ctx := context.Background()
	var ids []string
	for i := range 20 {
		res, err := c.Send(ctx, client.PostEvent("proved "+strings.Repeat("x", i), "tlog"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	key, err := c.TlogKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		var inc *client.Inclusion
		relaytest.Eventually(t, "a proof", func() bool {
			inc, err = c.ProveInclusion(ctx, id, key)
			return err == nil
		})
		if inc.Index != int64(i) || inc.Checkpoint.Size < int64(i+1) || !strings.HasSuffix(inc.Checkpoint.Origin, "/tlog") {
			t.Fatalf("event %d: index %d in a checkpoint of %d (%s)", i, inc.Index, inc.Checkpoint.Size, inc.Checkpoint.Origin)
		}
	}

	// A key of another name or key refuses the checkpoint.
	other := strings.Replace(key, "/tlog+", "/elsewhere+", 1)
	if _, err := c.ProveInclusion(ctx, ids[0], other); err == nil {
		t.Fatal("a checkpoint opened under another key")
	}
	// A proof is for one entry: a relay that answers with another event's
	// proof is caught.
	lying := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		if q.Get("id") == ids[0] {
			q.Set("id", ids[1])
		}
		resp, err := http.Get(r.URL + req.URL.Path + "?" + q.Encode())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	defer lying.Close()
	if _, err := client.New(lying.URL).ProveInclusion(ctx, ids[0], key); !errors.Is(err, client.ErrNotIncluded) {
		t.Fatalf("another event's proof: %v", err)
	}
	var apiErr *client.Error
	_, err = c.ProveInclusion(ctx, strings.Repeat("0", 64), key)
	if !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("unknown event: %v", err)
	}
}
