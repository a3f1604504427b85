package state_test

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/branches"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/trust"
)

// eachCorpusEvent calls fn with every event of the JSONL file at path.
func eachCorpusEvent(b *testing.B, path string, fn func(*protocol.Event)) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		if e, err := protocol.DecodeJSON(sc.Bytes()); err == nil {
			fn(e)
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
}

func heapNow() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkCorpusRestore folds the corpus file named by ANP2_CORPUS (one
// event a line, as `anp2 bench --replay N --corpus FILE` writes it) into
// trust, moderation, tasks and branches, saves them, and reports per view
// the seconds its Restore takes, the heap it holds once restored (bytes
// per corpus event) and its saved bytes. Skipped without ANP2_CORPUS;
// run with -benchtime 1x. Tasks' lookup serves the task events from
// memory (the log's reads are not counted).
func BenchmarkCorpusRestore(b *testing.B) {
	path := os.Getenv("ANP2_CORPUS")
	if path == "" {
		b.Skip("ANP2_CORPUS names no corpus file")
	}
	// Pass 1: the ids revocations name, so pass 2 keeps only those events
	// (and the task events) for lookups.
	wanted := map[string]bool{}
	eachCorpusEvent(b, path, func(e *protocol.Event) {
		if e.Kind == protocol.KindRevoke {
			for _, id := range e.TagValues("e") {
				wanted[id] = true
			}
		}
	})
	kept := map[string]*protocol.Event{}
	lookup := func(id string) *protocol.Event { return kept[id] }
	s := state.New(state.Options{Folds: []state.NamedFold{{Name: "branches", Fold: branches.NewFold()}}})
	n := 0
	t0 := time.Now()
	eachCorpusEvent(b, path, func(e *protocol.Event) {
		if wanted[e.ID] || e.Kind >= protocol.KindTaskRequest && e.Kind <= protocol.KindTaskCancel {
			kept[e.ID] = e
		}
		n++
		s.Add(int64(n), e, lookup)
	})
	b.Logf("%d events folded in %.1f s (parsing included)", n, time.Since(t0).Seconds())
	c, err := s.Capture()
	if err != nil {
		b.Fatal(err)
	}
	restorers := map[string]func() (state.Snapshotter, any){
		"trust": func() (state.Snapshotter, any) { g := trust.NewGraph(trust.Options{}); return g, g },
		"moderation": func() (state.Snapshotter, any) {
			m := trust.NewModeration(trust.NewGraph(trust.Options{}), trust.ModerationOptions{})
			return m, m
		},
		"tasks":    func() (state.Snapshotter, any) { f := tasks.New(nil); return f, f },
		"branches": func() (state.Snapshotter, any) { f := branches.NewFold(); return f, f },
	}
	for _, v := range c.Views {
		mk := restorers[v.Name]
		if mk == nil {
			continue
		}
		b.Run(v.Name, func(b *testing.B) {
			var held any
			before := heapNow()
			for b.Loop() {
				sn, obj := mk()
				if err := sn.Restore(io.Reader(bytes.NewReader(v.Data)), lookup); err != nil {
					b.Fatal(err)
				}
				held = obj
			}
			after := heapNow()
			runtime.KeepAlive(held)
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "restore-s")
			b.ReportMetric(float64(after-before)/float64(n), "heap-B/event")
			b.ReportMetric(float64(len(v.Data))/float64(n), "saved-B/event")
		})
	}
}
