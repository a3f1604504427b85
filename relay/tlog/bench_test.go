package tlog

import (
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/internal/pipeload"
	"github.com/anp2net/relay/relay/relaytest"
)

// BenchmarkPublishTree is the publish A/B of the transparency log: the
// same publishes (8 connections, raw HTTP/1.1, real SQLite file) into a
// relay without and with the tree, reporting the process CPU per publish.
//
//	go test ./relay/tlog/ -run XXX -bench PublishTree -benchtime 20000x -count 5
func BenchmarkPublishTree(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("tree=%v", on), func(b *testing.B) {
			var mods []relay.Module
			if on {
				mods = append(mods, NewModule(Options{}))
			}
			r := relaytest.Start(b, mods, func(c *relay.Config) {
				c.RelayKey = ed25519.NewKeyFromSeed(make([]byte, 32))
				c.Logger = slog.New(slog.DiscardHandler)
			})
			benchPublish(b, strings.TrimPrefix(r.URL, "http://"), r.Clock.Now().Unix())
		})
	}
}

func benchPublish(b *testing.B, host string, now int64) {
	const conns = 8
	keys := make([]ed25519.PrivateKey, 500)
	for i := range keys {
		seed := make([]byte, 32)
		seed[0], seed[1] = byte(i), byte(i>>8)
		keys[i] = ed25519.NewKeyFromSeed(seed)
	}
	reqs := make([][]byte, b.N)
	for i := range reqs {
		e := &protocol.Event{CreatedAt: now, Kind: 1, Content: fmt.Sprint("tree ", i), Tags: [][]string{{"t", fmt.Sprint("t", i%50)}}}
		e.Sign(keys[i%len(keys)])
		body := protocol.AppendJSON(nil, e)
		reqs[i] = fmt.Appendf(nil, "POST /events HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", host, len(body), body)
	}
	b.ResetTimer()
	cpu, err := pipeload.Post(host, reqs, conns, pipeload.OK)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}
