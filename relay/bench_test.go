package relay

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/internal/pipeload"
)

// BenchmarkPublish measures single-event publishes over real HTTP with
// 32 concurrent clients, and reports the raw Ed25519 verify rate of this
// machine beside it (verifies/s on all cores).
func BenchmarkPublish(b *testing.B) {
	r := startRelayB(b)
	keys := make([]ed25519.PrivateKey, 500)
	for i := range keys {
		keys[i] = key(i)
	}
	now := r.clock.now().Unix()
	bodies := make([][]byte, b.N)
	for i := range bodies {
		bodies[i] = protocol.AppendJSON(nil, mk(keys[i%len(keys)], now, 1, fmt.Sprint("bench ", i), []string{"t", fmt.Sprint("t", i%50)}))
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	cl := &http.Client{Transport: tr}
	var next atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			resp, err := cl.Post(r.URL+"/events", "application/json", bytes.NewReader(bodies[i]))
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
			}
		}
	})
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "events/s")
	b.ReportMetric(verifyRate(), "ceiling-verifies/s")
}

func verifyRate() float64 {
	k := key(1)
	msg := make([]byte, 32)
	sig := ed25519.Sign(k, msg)
	pub := k.Public().(ed25519.PublicKey)
	var n atomic.Int64
	done := make(chan struct{})
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		go func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				ed25519.Verify(pub, msg, sig)
				n.Add(1)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	close(done)
	return float64(n.Load()) / 0.3
}

// BenchmarkPublishBatch measures POST /events/batch of 100 events over real
// HTTP from 4 concurrent clients that accept gzip (as net/http's does);
// b.N counts events, so -benchmem gives the allocations per batched event.
func BenchmarkPublishBatch(b *testing.B) {
	const size = 100
	r := startRelayB(b)
	keys := make([]ed25519.PrivateKey, 500)
	for i := range keys {
		keys[i] = key(i)
	}
	now := r.clock.now().Unix()
	var bodies [][]byte
	for i := 0; i < b.N; i += size {
		body := []byte{'['}
		for k := i; k < min(b.N, i+size); k++ {
			if k > i {
				body = append(body, ',')
			}
			body = protocol.AppendJSON(body, mk(keys[k%len(keys)], now, 1, fmt.Sprint("batch ", k), []string{"t", fmt.Sprint("t", k%50)}))
		}
		bodies = append(bodies, append(body, ']'))
	}
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(bodies) {
					return
				}
				resp, err := cl.Post(r.URL+"/events/batch", "application/json", bytes.NewReader(bodies[i]))
				if err != nil {
					b.Error(err)
					return
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !bytes.Contains(out, []byte(`"rejected":0,`)) {
					b.Errorf("status %d: %.200s", resp.StatusCode, out)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "events/s")
}

// BenchmarkPublishOne measures single-event publishes (POST /events,
// JSON) through the real server on loopback from 8 keep-alive
// connections whose client is a few lines over a raw socket, so that
// -benchmem's allocations are nearly all the relay's. cpu-µs/op is this
// process's CPU (user+system, rusage) per publish: the relay's whole
// path, signature and SQLite writer included, plus the thin client.
func BenchmarkPublishOne(b *testing.B) {
	const conns = 8
	r := startRelayB(b)
	keys := make([]ed25519.PrivateKey, 500)
	for i := range keys {
		keys[i] = key(i)
	}
	now := r.clock.now().Unix()
	host := strings.TrimPrefix(r.URL, "http://")
	reqs := make([][]byte, b.N)
	for i := range reqs {
		body := protocol.AppendJSON(nil, mk(keys[i%len(keys)], now, 1, fmt.Sprint("one ", i), []string{"t", fmt.Sprint("t", i%50)}))
		reqs[i] = fmt.Appendf(nil, "POST /events HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s", host, len(body), body)
	}
	b.ResetTimer()
	cpu, err := pipeload.Post(host, reqs, conns, func(status, body []byte) error {
		if err := pipeload.OK(status, body); err != nil || !bytes.Contains(body, []byte(`"accepted":true`)) {
			return fmt.Errorf("%q %q", status, body)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}
