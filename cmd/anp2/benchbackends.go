package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/sqlite"
)

// benchBackends compares the log backends at c.backends events: it fills
// a SQLite log, times its migration into PostgreSQL, then serves each log
// from anp2 serve processes (SQLite; PostgreSQL with one process; with
// two, publishers and queriers spread over both) and measures publish
// throughput and GET /events latency against each.
func (c *benchCmd) benchBackends(ctx context.Context) error {
	if c.pg == "" {
		return fmt.Errorf("--backends needs --pg postgres://… (a server to create the bench's databases on)")
	}
	dir, err := os.MkdirTemp("", "anp2-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pgURL, drop, err := benchDatabase(ctx, c.pg)
	if err != nil {
		return err
	}
	defer drop()
	fmt.Fprintf(c.out, "machine: %d CPUs (GOMAXPROCS %d), %s/%s; PostgreSQL on the same machine\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)
	db := filepath.Join(dir, "bench.db")
	if c.corpus != "" {
		db = c.corpus // kept: a later run skips the fill
	}
	st, err := sqlite.Open(db, nil)
	if err != nil {
		return err
	}
	have, err := st.Stats(ctx)
	if err == nil && have.Events < int64(c.backends) {
		c.fill = c.backends - int(have.Events)
		err = c.fillLog(ctx, st)
	}
	st.Close()
	if err != nil {
		return err
	}
	m := &migrateCmd{out: c.out, progress: c.progress, from: db, to: pgURL}
	if err := m.Run(ctx); err != nil {
		return err
	}
	keys := make([]ed25519.PrivateKey, c.agents)
	for i := range keys {
		seed := make([]byte, 32)
		seed[0], seed[1], seed[2] = byte(i), byte(i>>8), 0xbd
		keys[i] = ed25519.NewKeyFromSeed(seed)
	}
	id := []string{"--relay-key", filepath.Join(dir, "relay.key"), "--public-base-url", "http://bench.test"}
	for ri, run := range []struct {
		name string
		dbs  []string
	}{{"SQLite, 1 process", []string{db}}, {"PostgreSQL, 1 process", []string{pgURL}}, {"PostgreSQL, 2 processes", []string{pgURL, pgURL}}} {
		var bases []string
		for _, d := range run.dbs {
			base, _, stop, err := serveProcess(ctx, d, id...)
			if err != nil {
				return err
			}
			defer stop()
			bases = append(bases, base)
		}
		evs := c.makeEvents(keys, c.events, time.Now().Unix()+int64(ri), fmt.Sprint("backends round ", ri))
		var mu sync.Mutex
		var lat []time.Duration
		errs := 0
		start := time.Now()
		c.spread(bases, func(i int, base string) {
			part := evs[i*len(evs)/len(bases) : (i+1)*len(evs)/len(bases)]
			l, _, e, err := c.publishAll(ctx, base, part, c.concurrency/len(bases), 0)
			if err != nil {
				e = len(part)
			}
			mu.Lock()
			lat, errs = append(lat, l...), errs+e
			mu.Unlock()
		})
		elapsed := time.Since(start)
		fmt.Fprintf(c.out, "%s over %d events: publish (%d clients) %d events in %s = %.0f accepted/s, %d errors\n", run.name, c.backends,
			c.concurrency, len(evs), elapsed.Round(time.Millisecond), float64(len(evs)-errs)/elapsed.Seconds(), errs)
		printLatency(c.out, "  publish latency", lat)
		lat = lat[:0]
		c.spread(bases, func(i int, base string) {
			cl := benchClient(base, c.queryConc)
			l := c.queryAll(ctx, cl, func(j int) url.Values {
				return url.Values{"t": {fmt.Sprint("topic", (j+i)%50)}, "limit": {"100"}}
			})
			mu.Lock()
			lat = append(lat, l...)
			mu.Unlock()
		})
		printLatency(c.out, "  GET /events?t=<topic>&limit=100", lat)
		lat = lat[:0]
		c.spread(bases, func(i int, base string) {
			cl := benchClient(base, c.queryConc)
			l := c.queryAll(ctx, cl, func(j int) url.Values {
				return url.Values{"authors": {protocol.AgentIDOf(keys[(j+i)%len(keys)])}, "limit": {"100"}}
			})
			mu.Lock()
			lat = append(lat, l...)
			mu.Unlock()
		})
		printLatency(c.out, "  GET /events?authors=<agent>&limit=100", lat)
	}
	return nil
}

// spread runs fn for every base at once and waits.
func (c *benchCmd) spread(bases []string, fn func(i int, base string)) {
	var wg sync.WaitGroup
	for i, b := range bases {
		wg.Add(1)
		go func() { defer wg.Done(); fn(i, b) }()
	}
	wg.Wait()
}

// benchDatabase creates an empty database on admin's server and returns
// its URL and a function that drops it.
func benchDatabase(ctx context.Context, admin string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("--pg: %w", err)
	}
	name := fmt.Sprintf("anp2_bench_%d", os.Getpid())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		conn.Close(ctx)
		return "", nil, fmt.Errorf("create bench database: %w", err)
	}
	drop := func() {
		conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		conn.Close(context.Background())
	}
	u, err := url.Parse(admin)
	if err != nil || !isPostgres(admin) {
		drop()
		return "", nil, fmt.Errorf("--pg must be a postgres:// URL")
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}
