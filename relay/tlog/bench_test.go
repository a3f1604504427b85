package tlog

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
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
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := processCPU()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", host)
			if err != nil {
				b.Error(err)
				return
			}
			defer nc.Close()
			br := bufio.NewReader(nc)
			for {
				i := int(next.Add(1) - 1)
				if i >= len(reqs) {
					return
				}
				if _, err := nc.Write(reqs[i]); err != nil {
					b.Error(err)
					return
				}
				if err := readAnswer(br); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	cpu := processCPU() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

// readAnswer reads one HTTP/1.1 answer with a Content-Length and fails
// unless it is a 200.
func readAnswer(br *bufio.Reader) error {
	status, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	ok := bytes.HasPrefix(status, []byte("HTTP/1.1 200 "))
	n := -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if v, found := bytes.CutPrefix(line, []byte("Content-Length: ")); found {
			n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	if n < 0 {
		return fmt.Errorf("answer without Content-Length: %q", status)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%q %q", status, body)
	}
	return nil
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
