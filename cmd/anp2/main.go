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
	"redact":     func(o, e io.Writer) command { return &redactCmd{out: o} },
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "anp2:", err)
			name := ""
			if len(os.Args) > 1 {
				name = os.Args[1]
			}
			if next := nextStep(name, err); next != "" {
				fmt.Fprintln(os.Stderr, "anp2: next:", next)
			}
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		writeOverview(stderr)
		return nil
	}
	switch args[0] {
	case "help":
		return runHelp(args[1:], stdout)
	case "version", "--version":
		fmt.Fprintln(stdout, versionString())
		return nil
	}
	mk, ok := commands[args[0]]
	if !ok {
		return fmt.Errorf("unknown command %q: run 'anp2 help' for the list of commands", args[0])
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
	if len(args) == 1 && args[0] == flagsProbe {
		return flagsProbed{fs}
	}
	if err := envDefaults(fs); err != nil {
		return err
	}
	return fs.Parse(args)
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }
