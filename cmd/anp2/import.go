package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/offline"
	"github.com/anp2net/relay/relay/sqlite"
)

type importCmd struct {
	out      io.Writer
	progress *progress
	db       string
	verbose  bool
	file     string
}

func (c *importCmd) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.StringVar(&c.db, "db", "./anp2.db", "SQLite database file to load into")
	fs.BoolVar(&c.verbose, "v", false, "print every rejected line")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: anp2 import [--db FILE] FILE.jsonl (- for stdin)")
	}
	c.file = fs.Arg(0)
	return nil
}

func (c *importCmd) Run(ctx context.Context) error {
	var in io.Reader = os.Stdin
	if c.file != "-" {
		f, err := os.Open(c.file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	st, err := sqlite.Open(c.db, nil)
	if err != nil {
		return damaged(c.db, err)
	}
	defer st.Close()
	start := time.Now()
	var last offline.ImportStats
	phase := ""
	show := func() {
		c.progress.step(phase, "read %d  accepted %d  duplicate %d  rejected %d  (%.0f/s) %s", last.Read, last.Accepted,
			last.Duplicate, last.Read-last.Accepted-last.Duplicate, float64(last.Read)/time.Since(start).Seconds(), phase)
	}
	im := &offline.Importer{Store: st, Checker: protocol.DefaultChecker(), Now: time.Now().Unix(),
		OnProgress: func(s offline.ImportStats) { last = s; show() },
		OnPhase:    func(p string) { phase = p; show() }}
	if c.verbose {
		im.OnInvalid = func(inv offline.Invalid) {
			b, _ := json.Marshal(inv)
			fmt.Fprintln(c.out, string(b))
		}
	}
	res, err := im.Import(ctx, in)
	c.progress.done()
	fmt.Fprintf(c.out, "read %d, accepted %d, duplicate %d, rejected %d in %s\n",
		res.Read, res.Accepted, res.Duplicate, res.Read-res.Accepted-res.Duplicate, time.Since(start).Round(time.Millisecond))
	codes := make([]string, 0, len(res.Rejected))
	for k := range res.Rejected {
		codes = append(codes, k)
	}
	sort.Strings(codes)
	for _, k := range codes {
		fmt.Fprintf(c.out, "  rejected %-32s %d\n", k, res.Rejected[k])
	}
	return err
}
