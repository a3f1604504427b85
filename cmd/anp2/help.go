package main

//go:generate sh -c "go run . help --markdown > ../../docs/configuration.md"

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
)

// commandDoc is what 'anp2 help' says about one subcommand.
type commandDoc struct {
	name     string
	summary  string   // one line
	usage    string   // the synopsis
	examples string   // shell lines, one per example
	subs     []string // subcommands with their own flag sets (dm send, dm read)
}

// commandDocs lists the subcommands in the order 'anp2 help' shows them.
// TestHelpCoversEveryCommand keeps it in step with commands.
var commandDocs = []commandDoc{
	{name: "serve", summary: "start the relay on a SQLite file or a PostgreSQL database",
		usage: "anp2 serve [--addr HOST:PORT] [--db PATH|postgres://…] [flags]",
		examples: `anp2 serve                                   # 127.0.0.1:8080, log in ./anp2.db
anp2 serve --addr :8080 --db /var/lib/anp2/anp2.db --public-base-url https://relay.example.org
anp2 serve --db postgres://anp2@db/anp2 --relay-key /etc/anp2/relay-key
anp2 serve --peer https://relay.example.org  # mirror a peer continuously`},
	{name: "keygen", summary: "create an Ed25519 key file and print its agent_id",
		usage:    "anp2 keygen [--key FILE] [--force]",
		examples: `anp2 keygen --key alice.key`},
	{name: "publish", summary: "build, mine, sign and post an event",
		usage: "anp2 publish [--relay URL] [--key FILE] [--kind N] [--content TEXT] [--tag name,value…]…",
		examples: `anp2 publish --key alice.key --content 'hello, relay' --tag t,intro
anp2 publish --key alice.key --kind 0 --content '{"name":"alice"}'   # a profile, mined to 12 bits
anp2 publish --key alice.key --content draft --dry-run                 # check without storing`},
	{name: "get", summary: "query events and print them as JSON lines",
		usage: "anp2 get [--relay URL] [--kinds N,…] [--authors ID,…] [--t TOPIC] [--limit N] [filters]",
		examples: `anp2 get --t intro --limit 10
anp2 get --kinds 0 --authors $(cat alice.id)`},
	{name: "import", summary: "load JSON-lines events (an export, a dataset) into a log",
		usage:    "anp2 import [--db PATH|postgres://…] FILE.jsonl   (- for stdin)",
		examples: `curl -s http://127.0.0.1:8080/export > dump.jsonl && anp2 import --db copy.db dump.jsonl`},
	{name: "replay", summary: "verify a log, rebuild every derived view and compare its digest with a relay's",
		usage: "anp2 replay [--compare URL] [--at UNIX] SOURCE   (a database file or postgres:// URL, an export file, a relay URL, or - for stdin)",
		examples: `anp2 replay ./anp2.db
anp2 replay --compare http://127.0.0.1:8080 http://127.0.0.1:8080   # download, rebuild, compare /state`},
	{name: "migrate", summary: "copy a log between SQLite and PostgreSQL",
		usage:    "anp2 migrate --from DB --to DB",
		examples: `anp2 migrate --from ./anp2.db --to postgres://anp2@db/anp2`},
	{name: "mirror", summary: "reconcile a local log with peer relays (fetch and push), then exit",
		usage:    "anp2 mirror [--db PATH|postgres://…] --peer URL…",
		examples: `anp2 mirror --db ./copy.db --peer http://127.0.0.1:8080`},
	{name: "cosign", summary: "endorse an event's content: print a cosign tag to attach with 'anp2 publish --cosign FILE'",
		usage: "anp2 cosign --key FILE --kind N (--content JSON | --content-file FILE) [--pq-key FILE]",
		examples: `anp2 cosign --key seed1.key --kind 12 --content-file cp.json > seed1.cosign
anp2 publish --key seed2.key --kind 12 --content "$(cat cp.json)" --cosign seed1.cosign`},
	{name: "pqkey", summary: "create an ML-DSA-65 key beside an agent key, for --pq-keys",
		usage:    "anp2 pqkey [--agent-key FILE] [--key FILE]",
		examples: `anp2 pqkey --agent-key seed1.key --key seed1.pq-key`},
	{name: "checkpoint", summary: "print the kind 12 content of a relay or a database at --at T, for the high-trust agents to cosign",
		usage:    "anp2 checkpoint [--at UNIX] [--id ID] SOURCE   (a relay URL or a database file)",
		examples: `anp2 checkpoint http://127.0.0.1:8080 > cp.json`},
	{name: "dm", summary: "send and read private messages (kind 3), sealed and opened on this side",
		usage: "anp2 dm send --key FILE --to AGENT_ID TEXT…\nanp2 dm read --key FILE [--with AGENT_ID] [--follow]",
		examples: `anp2 dm send --key alice.key --to $(cat bob.id) 'see you at six'
anp2 dm read --key bob.key --follow`, subs: []string{"send", "read"}},
	{name: "repair", summary: "salvage a damaged log into a fresh one, verifying every event, and fetch the rest from --peer relays",
		usage:    "anp2 repair [--db FILE] [--out NEWFILE] [--peer URL]…",
		examples: `anp2 repair --db anp2.db --peer https://relay.example.org   # keeps the original as anp2.db.damaged-<time>`},
	{name: "audit", summary: "check a relay's transparency log: signed checkpoint, consistency, entries",
		usage:    "anp2 audit URL [--state FILE] [--key VKEY] [--witness VKEY]…",
		examples: `anp2 audit http://127.0.0.1:8080 --state audit.state   # run it again later: it checks consistency`},
	{name: "redact", summary: "withhold a stored event's body for good (a legal takedown): its entry stays, GET /events/{id} answers 451",
		usage:    "anp2 redact [--db DB] --id EVENT_ID --reason TEXT [--relay-key FILE] [--state-dir DIR]   (with the relay stopped)",
		examples: `anp2 redact --db anp2.db --id 3f2a…e9 --reason 'court order 2026-123'   # then start the relay again`},
	{name: "bench", summary: "measure ingest and query speed against the machine's ceiling",
		usage: "anp2 bench [--events N] [--concurrency N] [--in-process] [--push|--views N|--replay N|--backends N|--scale N,N…]",
		examples: `anp2 bench                       # publish throughput and latency on a fresh relay process
anp2 bench --push                # push delivery to WebSocket subscribers and webhooks
anp2 bench --replay 100000       # the auditor's replay
anp2 bench --scale 1000000,3000000 --corpus corpora/   # restart, memory, publish and reads as the log grows`},
	{name: "help", summary: "list the commands, or show one command's examples and flags",
		usage:    "anp2 help [COMMAND] | anp2 help --markdown",
		examples: "anp2 help serve\nanp2 help --markdown > docs/configuration.md   # regenerate the configuration reference"},
	{name: "version", summary: "print the module version and the VCS revision it was built from",
		usage: "anp2 version", examples: "anp2 version"},
}

// envOnly are the settings read from the environment alone (no flag).
// TestConfigurationEnvComplete keeps it in step with the tree.
var envOnly = []struct{ name, def, meaning string }{
	{"ANP2_CPUPROFILE", "", "write a CPU profile of the whole command to this file (go tool pprof)"},
	{"ANP2_DELIVERY_DB", "<db>.delivery", "the delivery queue's SQLite file (beside a PostgreSQL log: <relay key file>.delivery)"},
	{"ANP2_TLOG_PATH", "<db>.tlog", "the transparency log's tree file (beside a PostgreSQL log: <relay key file>.tlog)"},
	{"ANP2_SPEC_PATH", "", "the SPEC.md whose sections /mcp serves as resources"},
	{"ANP2_TRIGGER_POW", "20", "proof of work a webhook trigger registration costs, in leading zero bits of its Authorization event's id (0 = none)"},
	{"ANP2_WEBHOOK_ALLOW_PRIVATE", "", "1: webhooks may target loopback and private addresses over plain http (a receiver on the relay's own network)"},
	{"ANP2_WS_REQ_ROWS", "10000", "stored rows one WebSocket connection's REQs may read a minute"},
	{"ANP2_WS_REQ_ROWS_PER_ADDR", "50000", "stored rows the WebSocket REQs of one client address (IPv6 by --ipv6-prefix) may read a minute"},
	{"ANP2_WS_QUEUE_BYTES", "4194304", "bytes waiting for one WebSocket connection"},
	{"ANP2_WS_QUEUE_BYTES_TOTAL", "134217728", "bytes waiting for all WebSocket connections"},
	{"ANP2_STREAM_QUEUE_BYTES", "4194304", "bytes waiting for one GET /stream reader"},
	{"ANP2_STREAM_QUEUE_BYTES_TOTAL", "134217728", "bytes waiting for all GET /stream readers"},
	{"ANP2_STREAM_REPLAY_ROWS", "50000", "stored rows one client address's resumed streams may read a minute"},
	{"ANP2_KEY", "", "Go SDK (client.KeyFromEnv): the agent's Ed25519 seed in 64 hex; for the anp2 commands ANP2_KEY is --key, a key file's path"},
	{"ANP2_KEY_FILE", "", "Go SDK (client.KeyFromEnv): the agent's key file, when ANP2_KEY is unset"},
	{"ANP2_PASSPHRASE", "", "Go SDK (client.KeyFromEnv): derive the agent's key from this passphrase (the Python SDK's derivation), when neither ANP2_KEY nor ANP2_KEY_FILE is set"},
	{"ANP2_PUSH_TRACE", "", "bench --push: write a per-event delivery trace to this file"},
}

// flagsProbe, given as the only argument to a command's flag parsing, makes
// parse hand back the command's flag set instead of parsing: help and the
// configuration page read every flag this way, so neither can miss one.
const flagsProbe = "\x00anp2-flags-probe"

// flagsProbed carries a command's flag set out of ParseFlags.
type flagsProbed struct{ fs *flag.FlagSet }

func (flagsProbed) Error() string { return "flag set probed" }

// flagSets returns the flag sets of command name, one per subcommand (dm
// send, dm read), or an error for an unknown command.
func flagSets(name string) ([]*flag.FlagSet, error) {
	mk, ok := commands[name]
	if !ok {
		return nil, nil // help and version have no flags
	}
	subs := []string{""}
	if d, ok := docOf(name); ok && len(d.subs) > 0 {
		subs = d.subs
	}
	var out []*flag.FlagSet
	for _, sub := range subs {
		args := []string{flagsProbe}
		if sub != "" {
			args = []string{sub, flagsProbe}
		}
		var p flagsProbed
		if err := mk(io.Discard, io.Discard).ParseFlags(args); !errors.As(err, &p) {
			return nil, fmt.Errorf("%s: ParseFlags did not reach parse (%v)", name, err)
		}
		out = append(out, p.fs)
	}
	return out, nil
}

func docOf(name string) (commandDoc, bool) {
	for _, d := range commandDocs {
		if d.name == name {
			return d, true
		}
	}
	return commandDoc{}, false
}

// envName is the environment variable that sets flag name.
func envName(flagName string) string {
	return "ANP2_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// writeOverview prints every command with its one line.
func writeOverview(w io.Writer) {
	fmt.Fprintln(w, "anp2 — the ANP2 relay and its client tools")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: anp2 COMMAND [flags]")
	fmt.Fprintln(w)
	for _, d := range commandDocs {
		fmt.Fprintf(w, "  %-11s %s\n", d.name, d.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'anp2 help COMMAND' for its examples and flags. Every flag also reads")
	fmt.Fprintln(w, "ANP2_<FLAG> from the environment (dashes become underscores); flags win.")
	fmt.Fprintln(w, "Docs: docs/operating.md, docs/configuration.md (every flag and variable).")
}

// writeCommandHelp prints one command's synopsis, examples and flags.
func writeCommandHelp(w io.Writer, name string) error {
	d, ok := docOf(name)
	if !ok {
		return fmt.Errorf("unknown command %q: run 'anp2 help' for the list", name)
	}
	fs, err := flagSets(name)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "anp2 %s — %s\n\nUsage:\n", d.name, d.summary)
	for _, l := range strings.Split(d.usage, "\n") {
		fmt.Fprintf(w, "  %s\n", l)
	}
	fmt.Fprintln(w, "\nExamples:")
	for _, l := range strings.Split(d.examples, "\n") {
		fmt.Fprintf(w, "  %s\n", l)
	}
	for i, f := range fs {
		title := "Flags"
		if len(d.subs) > 0 {
			title = "Flags of 'anp2 " + name + " " + d.subs[i] + "'"
		}
		fmt.Fprintf(w, "\n%s (each also read from ANP2_<FLAG>):\n", title)
		f.SetOutput(w)
		f.PrintDefaults()
	}
	return nil
}

// writeMarkdown prints docs/configuration.md: every flag of every command
// with its environment variable, default and meaning, then the settings
// read from the environment alone.
func writeMarkdown(w io.Writer) error {
	fmt.Fprint(w, `# Configuration reference

<!-- Generated by 'go run ./cmd/anp2 help --markdown > docs/configuration.md'. Do not edit:
     TestConfigurationPageCurrent fails when this page differs from the flags. -->

Every setting is read in this order: the default, then the environment variable,
then the command-line flag. Each flag --name is also read from ANP2_NAME (upper
case, dashes become underscores). Durations take Go's form (`+"`90s`, `5m`, `24h`"+`).
See [operating.md](operating.md) for how to choose them.

`)
	for _, d := range commandDocs {
		fs, err := flagSets(d.name)
		if err != nil {
			return err
		}
		if len(fs) == 0 {
			continue
		}
		fmt.Fprintf(w, "## anp2 %s\n\n%s.\n\n", d.name, upperFirst(d.summary))
		for i, f := range fs {
			if len(d.subs) > 0 {
				fmt.Fprintf(w, "### anp2 %s %s\n\n", d.name, d.subs[i])
			}
			fmt.Fprintln(w, "| Flag | Environment | Default | Meaning |")
			fmt.Fprintln(w, "|---|---|---|---|")
			f.VisitAll(func(fl *flag.Flag) {
				fmt.Fprintf(w, "| `--%s` | `%s` | %s | %s |\n", fl.Name, envName(fl.Name), mdDefault(fl), mdCell(fl.Usage))
			})
			fmt.Fprintln(w)
		}
	}
	fmt.Fprint(w, "## Environment only\n\nThese have no flag.\n\n| Variable | Default | Meaning |\n|---|---|---|\n")
	env := append(envOnly[:0:0], envOnly...)
	sort.Slice(env, func(i, j int) bool { return env[i].name < env[j].name })
	for _, e := range env {
		def := "(unset)"
		if e.def != "" {
			def = "`" + e.def + "`"
		}
		fmt.Fprintf(w, "| `%s` | %s | %s |\n", e.name, def, mdCell(e.meaning))
	}
	return nil
}

func mdDefault(f *flag.Flag) string {
	if f.DefValue == "" || f.DefValue == "[]" {
		return "(none)"
	}
	return "`" + f.DefValue + "`"
}

func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// runHelp is 'anp2 help [COMMAND|--markdown]'.
func runHelp(args []string, stdout io.Writer) error {
	switch {
	case len(args) == 0:
		writeOverview(stdout)
		return nil
	case args[0] == "--markdown" || args[0] == "-markdown":
		return writeMarkdown(stdout)
	default:
		return writeCommandHelp(stdout, args[0])
	}
}

// versionString is the module version, the VCS revision and the Go
// version the binary was built with, from its build information.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	return versionOf(bi, ok)
}

// versionOf formats build information bi (ok false: none was found).
func versionOf(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "anp2 (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, when, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = " (modified)"
			}
		}
	}
	out := "anp2 " + v
	if rev != "" {
		out += " revision " + rev + dirty
		if when != "" {
			out += " " + when
		}
	} else {
		out += " revision unknown (built with -buildvcs=false or outside a git checkout)"
	}
	return out + " " + bi.GoVersion
}

// nextStep says what to do after command cmd failed with err, for the
// line main prints under the error; "" when the error already says it.
func nextStep(cmd string, err error) string {
	msg := err.Error()
	helpCmd := "run 'anp2 help " + cmd + "' for examples and every flag"
	if _, ok := commands[cmd]; !ok {
		helpCmd = "run 'anp2 help' for the list of commands"
	}
	var urlErr *url.Error
	var opErr *net.OpError
	var af *auditFailure
	switch {
	case errors.Is(err, context.Canceled), errors.As(err, &af),
		strings.Contains(msg, "anp2 repair"), strings.Contains(msg, "stop that process"), strings.Contains(msg, "anp2 help"):
		return "" // interrupted, an audit's verdict, or the message already says what to do
	case errors.Is(err, fs.ErrExist):
		return "pass --force to overwrite it, or choose another path"
	case errors.Is(err, fs.ErrNotExist) && strings.Contains(msg, "key"):
		return "create a key with 'anp2 keygen --key FILE', or pass --key with the path of yours"
	case errors.Is(err, fs.ErrNotExist):
		return "check the path; " + helpCmd
	case errors.Is(err, fs.ErrPermission):
		return "check the file's owner and mode, or run as the user that owns it"
	case errors.As(err, &urlErr), errors.As(err, &opErr), errors.Is(err, syscall.ECONNREFUSED):
		return "is a relay running at that URL? start one with 'anp2 serve', or pass --relay URL"
	case strings.Contains(msg, "relay answered") && cmd == "publish":
		return "the code and detail are the relay's (SPEC.md lists every code); 'anp2 publish --dry-run' lists every violation of the event"
	case strings.Contains(msg, "relay answered"):
		return "the code and detail are the relay's (SPEC.md lists every code); " + helpCmd
	}
	return helpCmd
}
