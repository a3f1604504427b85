package discovery_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/sqlite"
)

// The network-scale benchmarks (issue #18: 100,000 agents, 1,000,000
// events) take minutes to build their corpus, so they run only with
// ANP2_BENCH_SCALE=1; ANP2_BENCH_AGENTS and ANP2_BENCH_EVENTS change the
// size (defaults 100000 and 1000000). Run them once with e.g.
//
//	ANP2_BENCH_SCALE=1 go test ./relay/discovery -run '^$' -bench Scale -benchtime 2000x -timeout 60m
//
// The corpus: per agent one profile, one capability (500 names), one
// follow and the rest posts (a third replies to other agents' first
// posts), 12 words of a Zipf vocabulary of 20,000 and one of 2,000 topics
// each, spread over the last 7 days; every event signed with its agent's
// own Ed25519 key (the signatures are made on every core in parallel).
type scaleCorpus struct {
	keys []ed25519.PrivateKey
	ids  []string
	evs  []*protocol.Event
	now  int64
}

var (
	scaleOnce sync.Once
	scale     scaleCorpus
)

func scaleSize(b *testing.B) (agents, events int) {
	if os.Getenv("ANP2_BENCH_SCALE") == "" {
		b.Skip("set ANP2_BENCH_SCALE=1 to build the 100,000-agent, 1,000,000-event corpus")
	}
	agents, events = 100_000, 1_000_000
	if n, err := strconv.Atoi(os.Getenv("ANP2_BENCH_AGENTS")); err == nil && n > 0 {
		agents = n
	}
	if n, err := strconv.Atoi(os.Getenv("ANP2_BENCH_EVENTS")); err == nil && n > 0 {
		events = n
	}
	return agents, events
}

func scaleCorpusFor(b *testing.B) scaleCorpus {
	agents, events := scaleSize(b)
	scaleOnce.Do(func() {
		t0 := time.Now()
		scale = buildScale(agents, events)
		fmt.Fprintf(os.Stderr, "scale corpus: %d agents, %d events signed in %s\n", agents, len(scale.evs), time.Since(t0).Round(time.Millisecond))
	})
	return scale
}

// signScale signs e with key, or, with ANP2_BENCH_UNSIGNED=1 (quick
// fold-only profiling; never for the HTTP benchmark, whose relay stores
// the events), only gives it its author and id.
func signScale(e *protocol.Event, key ed25519.PrivateKey, id string) {
	if os.Getenv("ANP2_BENCH_UNSIGNED") == "" {
		e.Sign(key)
		return
	}
	e.AgentID = id
	sum := e.ComputeID()
	e.ID = hex.EncodeToString(sum[:])
}

func scaleKey(i int) ed25519.PrivateKey {
	var seed [32]byte
	binary.BigEndian.PutUint64(seed[:], uint64(i)+1)
	seed[31] = 0x5c
	return ed25519.NewKeyFromSeed(seed[:])
}

// parallel runs f(i) for i in [0, n) on every core.
func parallel(n int, f func(worker, i int)) {
	w := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for k := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k; i < n; i += w {
				f(k, i)
			}
		}()
	}
	wg.Wait()
}

func buildScale(agents, events int) scaleCorpus {
	const week = 7 * 86400
	now := int64(relaytest.VectorTime)
	c := scaleCorpus{keys: make([]ed25519.PrivateKey, agents), ids: make([]string, agents), now: now}
	per := max(4, events/agents)
	roots := make([]*protocol.Event, agents)
	word := func(z *rand.Zipf) string { return "w" + strconv.FormatUint(z.Uint64(), 10) }
	text := func(z *rand.Zipf) string {
		s := ""
		for range 12 {
			s += word(z) + " "
		}
		return s
	}
	rngs := make([]*rand.Rand, runtime.GOMAXPROCS(0))
	zipfs := make([]*rand.Zipf, len(rngs))
	for k := range rngs {
		rngs[k] = rand.New(rand.NewPCG(uint64(k), 7))
		zipfs[k] = rand.NewZipf(rngs[k], 1.1, 1, 19999)
	}
	topic := func(r *rand.Rand) string { return "topic" + strconv.Itoa(int(r.ExpFloat64()*300)%2000) }
	parallel(agents, func(k, i int) {
		c.keys[i] = scaleKey(i)
		c.ids[i] = protocol.AgentIDOf(c.keys[i])
		r := rngs[k]
		e := &protocol.Event{CreatedAt: now - week + r.Int64N(week-60), Kind: protocol.KindPost, Content: text(zipfs[k]),
			Tags: [][]string{{"t", topic(r)}}}
		signScale(e, c.keys[i], c.ids[i])
		roots[i] = e
	})
	out := make([][]*protocol.Event, agents)
	parallel(agents, func(k, i int) {
		r, z, key := rngs[k], zipfs[k], c.keys[i]
		sign := func(kind int64, at int64, content string, tags ...[]string) {
			e := &protocol.Event{CreatedAt: at, Kind: kind, Content: content, Tags: tags}
			signScale(e, key, c.ids[i])
			out[i] = append(out[i], e)
		}
		at := func() int64 { return now - week + r.Int64N(week-60) }
		out[i] = append(out[i], roots[i])
		sign(protocol.KindProfile, now-week-3600, fmt.Sprintf(`{"name":"agent%d","about":"%s"}`, i, text(z)))
		sign(protocol.KindCapability, now-week-3600, "{}", []string{"cap", "cap" + strconv.Itoa(r.IntN(500))})
		sign(protocol.KindSubscribe, now-week-1800, "", []string{"p", protocol.AgentIDOf(scaleKey(r.IntN(agents)))})
		for range per - 4 {
			if r.IntN(3) == 0 {
				root := roots[r.IntN(agents)]
				sign(protocol.KindReply, max(at(), root.CreatedAt+1), text(z), []string{"e", root.ID, "root"}, []string{"t", topic(r)})
			} else {
				sign(protocol.KindPost, at(), text(z), []string{"t", topic(r)})
			}
		}
	})
	for _, l := range out {
		c.evs = append(c.evs, l...)
	}
	slices.SortFunc(c.evs, func(a, b *protocol.Event) int { // the log's arrival order: by time
		if a.CreatedAt != b.CreatedAt {
			return int(a.CreatedAt - b.CreatedAt)
		}
		return 0
	})
	return c
}

// measureP99 runs q n times over random agents and returns the mean and p99.
func measureP99(ids []string, n int, q func(id string)) (mean, p99 time.Duration) {
	rng := rand.New(rand.NewPCG(5, 6))
	lat := make([]time.Duration, 0, n)
	var sum time.Duration
	for range n {
		t0 := time.Now()
		q(ids[rng.IntN(len(ids))])
		d := time.Since(t0)
		lat = append(lat, d)
		sum += d
	}
	slices.Sort(lat)
	return sum / time.Duration(n), lat[len(lat)*99/100]
}

func report(b *testing.B, mean, p99 time.Duration) {
	b.ReportMetric(float64(mean.Microseconds())/1000, "mean-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
}

// BenchmarkScaleFold folds the whole corpus into an empty discovery fold
// over a store file (the fold alone: no signature check, no log) and
// reports the cost per event, the heap and the store's size; then it
// measures /neighbors (k=20), /copresence (7 d, 50), /citations (an
// event's incoming and outgoing edges) and the feed's candidate read (an
// author's and two topics' 300 newest stubs in 7 days) as fold queries
// while another goroutine keeps folding new posts (the fold's writer lock
// contended as on a publishing relay); last it saves the fold (capture
// and encoding), closes it and restores a fold over the same store from
// what was saved, timing each.
func BenchmarkScaleFold(b *testing.B) {
	c := scaleCorpusFor(b)
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	f := benchNew(b)
	t0, cpu0 := time.Now(), cpuTime()
	for _, e := range c.evs {
		f.Add(e)
	}
	f.FlushStore() // what the buffer holds is part of the cost
	took, cpu := time.Since(t0), cpuTime()-cpu0
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	fmt.Fprintf(os.Stderr, "scale fold: %.2f µs per event (%.2f µs of CPU), heap %d MiB\n",
		float64(took.Nanoseconds())/float64(len(c.evs))/1000, float64(cpu.Nanoseconds())/float64(len(c.evs))/1000,
		(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))>>20)
	if p := os.Getenv("ANP2_BENCH_HEAPPROFILE"); p != "" { // the live heap after the fold, for go tool pprof
		if fh, err := os.Create(p); err == nil {
			pprof.WriteHeapProfile(fh)
			fh.Close()
		}
	}

	stop := make(chan struct{})
	var folded atomic.Int64
	bg := make(chan struct{})
	go func() { // background publishing: a new post folded every 200 µs at most
		defer close(bg)
		r := rand.New(rand.NewPCG(9, 9))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			e := &protocol.Event{ID: fmt.Sprintf("%064x", 1<<62+i), AgentID: c.ids[r.IntN(len(c.ids))], Kind: protocol.KindPost,
				CreatedAt: c.now - 30, Content: "harbor w1 w7 w12 w300 w4000", Tags: [][]string{{"t", "topic3"}}}
			f.Add(e)
			folded.Add(1)
			time.Sleep(200 * time.Microsecond)
		}
	}()
	b.ResetTimer()
	b.Run("neighbors", func(b *testing.B) {
		mean, p99 := measureP99(c.ids, b.N, func(id string) { f.Neighbors(id, 20) })
		report(b, mean, p99)
	})
	b.Run("copresence", func(b *testing.B) {
		mean, p99 := measureP99(c.ids, b.N, func(id string) { f.Copresence(id, c.now, 7*86400, 50) })
		report(b, mean, p99)
	})
	evIDs := make([]string, 0, len(c.evs))
	for _, e := range c.evs {
		evIDs = append(evIDs, e.ID)
	}
	b.Run("citations", func(b *testing.B) {
		mean, p99 := measureP99(evIDs, b.N, func(id string) { f.CitedBy(id); f.Cites(id) })
		report(b, mean, p99)
	})
	b.Run("feed-candidates", func(b *testing.B) {
		mean, p99 := measureP99(c.ids, b.N, func(id string) {
			f.Recent([]string{id}, []string{"topic3", "topic7"}, c.now-7*86400, c.now, 300)
		})
		report(b, mean, p99)
	})
	close(stop)
	<-bg
	b.StopTimer()
	fmt.Fprintf(os.Stderr, "scale fold: %d events in %s; %d posts folded in the background\n", len(c.evs), took.Round(time.Millisecond), folded.Load())
	saveRestore(b, f)
}

// saveRestore saves f, closes it, and restores a fold over the same store
// from what was saved, reporting the time of each step and the sizes.
func saveRestore(b *testing.B, f *discovery.Fold) {
	path := f.StorePath()
	t0 := time.Now()
	f.PrepareSnapshot() // as state.Capture does, before the lock
	prepared := time.Since(t0)
	t0 = time.Now()
	encode := f.CaptureSnapshot()
	captured := time.Since(t0)
	var saved bytes.Buffer
	if err := encode(&saved); err != nil {
		b.Fatal(err)
	}
	encoded := time.Since(t0) - captured
	disk := f.DiskSize()
	f.Close()
	runtime.GC()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	t0, cpu0 := time.Now(), cpuTime()
	g, err := discovery.Open(path, false)
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Restore(bytes.NewReader(saved.Bytes()), nil); err != nil {
		b.Fatal(err)
	}
	restored, cpu := time.Since(t0), cpuTime()-cpu0
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	fmt.Fprintf(os.Stderr, "scale fold: prepare %s, capture %s, encode %s (%d KiB saved), store %d MiB; restore %s (%s of CPU), restored heap %d MiB\n",
		prepared.Round(time.Millisecond), captured.Round(time.Millisecond), encoded.Round(time.Millisecond), saved.Len()>>10, disk>>20,
		restored.Round(time.Millisecond), cpu.Round(time.Millisecond), (int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))>>20)
	g.Close()
}

// BenchmarkScaleHTTP stores the signed corpus in a real SQLite log (bulk
// load), starts a real relay on it (the start folds the whole log into
// every view) and measures GET /neighbors, /copresence and /feed over
// loopback HTTP while a client publishes signed posts through
// POST /events in the background at up to scalePublishRate a second.
// scalePublishRate is the background publishing rate of BenchmarkScaleHTTP:
// 100 events a second, 8.6 million a day.
const scalePublishRate = 100

func BenchmarkScaleHTTP(b *testing.B) {
	if os.Getenv("ANP2_BENCH_UNSIGNED") != "" {
		b.Skip("the HTTP benchmark stores signed events only")
	}
	c := scaleCorpusFor(b)
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "scale.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	t0 := time.Now()
	if err := st.BeginBulk(ctx); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(c.evs); i += 8192 {
		recs := make([]eventlog.Record, 0, 8192)
		for _, e := range c.evs[i:min(i+8192, len(c.evs))] {
			recs = append(recs, eventlog.NewRecord(e, nil, "json", c.now-60))
		}
		if _, err := st.AppendBatch(ctx, recs); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.EndBulk(nil); err != nil {
		b.Fatal(err)
	}
	loaded := time.Since(t0)
	t0 = time.Now()
	r := relaytest.On(b, st, []relay.Module{discovery.NewModule()})
	started := time.Since(t0)
	fmt.Fprintf(os.Stderr, "scale relay: bulk load %s, start (fold of every view) %s\n", loaded.Round(time.Millisecond), started.Round(time.Millisecond))

	stop := make(chan struct{})
	var published atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		key := scaleKey(len(c.ids) + 1)
		tick := time.NewTicker(time.Second / scalePublishRate)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			e := &protocol.Event{CreatedAt: c.now - 1, Kind: protocol.KindPost, Content: "background w1 w7 w12 " + strconv.Itoa(i),
				Tags: [][]string{{"t", "topic3"}}}
			e.Sign(key)
			if a := r.Do(b, "POST", "/events", "application/json", protocol.AppendJSON(nil, e)); a.Status == 200 {
				published.Add(1)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	get := func(path string) {
		if a := r.Do(b, "GET", path, "", nil); a.Status != 200 {
			b.Fatalf("GET %s: %d %s", path, a.Status, a.Body)
		}
	}
	b.ResetTimer()
	for _, q := range []struct{ name, path string }{
		{"neighbors", "/neighbors/%s?k=20"}, {"copresence", "/copresence/%s"}, {"feed", "/feed/%s"},
	} {
		b.Run(q.name, func(b *testing.B) {
			mean, p99 := measureP99(c.ids, b.N, func(id string) { get(fmt.Sprintf(q.path, id)) })
			report(b, mean, p99)
		})
	}
	fmt.Fprintf(os.Stderr, "scale relay: %d posts published in the background while measuring\n", published.Load())
}
