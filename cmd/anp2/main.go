// Command anp2 is the ANP2 relay and its client tools in one binary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
)

// command is one subcommand: it parses its flags, runs, and cleans up.
type command interface {
	ParseFlags(args []string) error
	Run(ctx context.Context) error
}

var commands = map[string]func(stdout, stderr io.Writer) command{
	"serve":      func(o, e io.Writer) command { return newServe(o, e) },
	"keygen":     func(o, e io.Writer) command { return &keygenCmd{out: o} },
	"publish":    func(o, e io.Writer) command { return &publishCmd{out: o} },
	"get":        func(o, e io.Writer) command { return &getCmd{out: o} },
	"import":     func(o, e io.Writer) command { return &importCmd{out: o, progress: newProgress(e)} },
	"bench":      func(o, e io.Writer) command { return &benchCmd{out: o, progress: newProgress(e)} },
	"replay":     func(o, e io.Writer) command { return &replayCmd{out: o, progress: newProgress(e)} },
	"mirror":     func(o, e io.Writer) command { return &mirrorCmd{out: o, progress: newProgress(e)} },
	"migrate":    func(o, e io.Writer) command { return &migrateCmd{out: o, progress: newProgress(e)} },
	"cosign":     func(o, e io.Writer) command { return &cosignCmd{out: o} },
	"pqkey":      func(o, e io.Writer) command { return &pqKeygenCmd{out: o} },
	"checkpoint": func(o, e io.Writer) command { return &checkpointCmd{out: o} },
	"dm":         func(o, e io.Writer) command { return &dmCmd{out: o, errOut: e} },
	"repair":     func(o, e io.Writer) command { return &repairCmd{out: o, progress: newProgress(e)} },
	"audit":      func(o, e io.Writer) command { return &auditCmd{out: o, progress: newProgress(e)} },
}

const usage = `anp2 — ANP2 relay and tools

  anp2 serve    start the relay (SQLite log at --db, default ./anp2.db, or
                PostgreSQL with --db postgres://…)
  anp2 keygen   create an Ed25519 key file and print its agent_id
  anp2 publish  build, mine, sign and post an event
  anp2 get      query events and print them as JSON lines
  anp2 import   load JSON-lines events (an export, a dataset) into a log
  anp2 replay   verify a log (file, database or relay URL), rebuild every
                derived view and compare its state digest with a relay's
  anp2 migrate  copy a log between SQLite and PostgreSQL: --from DB --to DB
  anp2 mirror   reconcile a local log with peer relays (fetch and push)
  anp2 cosign   endorse an event's content: print a cosign tag to attach
                with 'anp2 publish --cosign FILE' (--pq-key adds a pq_sig)
  anp2 pqkey    create an ML-DSA-65 key beside an agent key, for --pq-keys
  anp2 checkpoint  print the kind 12 content of a relay or a database at
                --at T, for the high-trust agents to cosign
  anp2 dm       send and read private messages (kind 3), sealed and
                opened on this side: 'anp2 dm send', 'anp2 dm read'
  anp2 repair   salvage a damaged log into a fresh one, verifying every
                event, and fetch what was unreadable from --peer relays
  anp2 audit    check a relay's transparency log: its signed checkpoint,
                consistency with the last audit (--state FILE), and that its
                entries hash to the root and are /export's ids in order
  anp2 bench    measure ingest and query speed against the machine's ceiling

Run 'anp2 <command> -h' for its flags. Every flag also reads ANP2_<FLAG>
from the environment (dashes become underscores). ANP2_CPUPROFILE=FILE
writes a CPU profile of the whole command to FILE (go tool pprof).`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "anp2:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, usage)
		return nil
	}
	mk, ok := commands[args[0]]
	if !ok {
		return fmt.Errorf("unknown command %q\n\n%s", args[0], usage)
	}
	cmd := mk(stdout, stderr)
	if err := cmd.ParseFlags(args[1:]); err != nil {
		return err
	}
	if path := os.Getenv("ANP2_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	return cmd.Run(ctx)
}

// envDefaults sets every flag of fs that has an ANP2_<NAME> variable in the
// environment, so the order is defaults, then environment, then flags.
func envDefaults(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := "ANP2_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok && err == nil {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s: %w", name, e)
			}
		}
	})
	return err
}

// parse applies environment defaults, then args.
func parse(fs *flag.FlagSet, args []string) error {
	if err := envDefaults(fs); err != nil {
		return err
	}
	return fs.Parse(args)
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }
