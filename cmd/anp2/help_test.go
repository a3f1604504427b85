package main

import (
	"bytes"
	"context"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestHelpCoversEveryCommand: every command has a help entry with a
// summary, a synopsis and examples, and its flag set can be read.
func TestHelpCoversEveryCommand(t *testing.T) {
	for name := range commands {
		d, ok := docOf(name)
		if !ok || d.summary == "" || d.usage == "" || d.examples == "" {
			t.Errorf("command %q has no complete help entry in commandDocs", name)
		}
		sets, err := flagSets(name)
		if err != nil || len(sets) == 0 {
			t.Errorf("flag sets of %q: %v (%d)", name, err, len(sets))
		}
	}
	for _, d := range commandDocs {
		if _, ok := commands[d.name]; !ok && d.name != "help" && d.name != "version" {
			t.Errorf("commandDocs lists %q, which is no command", d.name)
		}
	}
}

// TestHelpListsCommands: 'anp2 help' prints one line per command.
func TestHelpListsCommands(t *testing.T) {
	var out, errw bytes.Buffer
	if err := run(context.Background(), []string{"help"}, &out, &errw); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	for _, d := range commandDocs {
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), d.name+" ") && strings.Contains(l, d.summary) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("'anp2 help' has %d lines for %q, want 1:\n%s", n, d.name, out.String())
		}
	}
}

// TestHelpCommandShowsExamples: 'anp2 help CMD' shows the examples and
// every flag of the command.
func TestHelpCommandShowsExamples(t *testing.T) {
	for _, d := range commandDocs {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"help", d.name}, &out, &out); err != nil {
			t.Fatalf("help %s: %v", d.name, err)
		}
		s := out.String()
		if !strings.Contains(s, "Examples:") || !strings.Contains(s, strings.Split(d.examples, "\n")[0]) {
			t.Errorf("help %s shows no examples:\n%s", d.name, s)
		}
		sets, _ := flagSets(d.name)
		for _, fs := range sets {
			for _, name := range flagNames(fs) {
				if !strings.Contains(s, "  -"+name) {
					t.Errorf("help %s does not show flag --%s", d.name, name)
				}
			}
		}
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"help", "nope"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "anp2 help") {
		t.Errorf("help of an unknown command: %v, want an error pointing at 'anp2 help'", err)
	}
	err = run(context.Background(), []string{"nope"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "anp2 help") {
		t.Errorf("unknown command: %v, want an error pointing at 'anp2 help'", err)
	}
}

// TestVersion: 'anp2 version' of the built binary names the module
// version and the Go version; a build with VCS information shows the
// revision and whether the tree was modified.
func TestVersion(t *testing.T) {
	out, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("anp2 version: %v\n%s", err, out)
	}
	s := strings.TrimSpace(string(out))
	if !strings.HasPrefix(s, "anp2 ") || !strings.Contains(s, runtime.Version()) || strings.Count(s, "\n") != 0 {
		t.Errorf("anp2 version = %q, want one line naming anp2 and %s", s, runtime.Version())
	}
	bi := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Path: "github.com/anp2net/relay", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := versionOf(bi, true), "anp2 v1.2.3 revision 0123456789abcdef (modified) 2026-01-02T03:04:05Z go1.99"; got != want {
		t.Errorf("versionOf = %q, want %q", got, want)
	}
	bi.Settings = nil
	if got := versionOf(bi, true); !strings.Contains(got, "revision unknown") {
		t.Errorf("versionOf without VCS = %q, want it to say the revision is unknown", got)
	}
}

// TestConfigurationPageCurrent: docs/configuration.md is exactly what
// 'anp2 help --markdown' prints, so a flag added, removed or reworded
// without regenerating the page fails here.
func TestConfigurationPageCurrent(t *testing.T) {
	var gen bytes.Buffer
	if err := run(context.Background(), []string{"help", "--markdown"}, &gen, &gen); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gen.Bytes(), page) {
		t.Fatal("docs/configuration.md differs from the flags: run 'go run ./cmd/anp2 help --markdown > docs/configuration.md' and commit it")
	}
	for _, name := range []string{"serve", "publish", "mirror", "replay"} {
		sets, _ := flagSets(name)
		for _, fs := range sets {
			for _, f := range flagNames(fs) {
				if !bytes.Contains(page, []byte("`--"+f+"` | `"+envName(f)+"`")) {
					t.Errorf("docs/configuration.md has no row for %s --%s", name, f)
				}
			}
		}
	}
}

// TestConfigurationEnvComplete: every ANP2_* variable the relay's code
// reads is either a flag's variable or listed in envOnly (and so on the
// configuration page).
func TestConfigurationEnvComplete(t *testing.T) {
	known := map[string]bool{}
	for _, e := range envOnly {
		known[e.name] = true
	}
	for name := range commands {
		sets, _ := flagSets(name)
		for _, fs := range sets {
			for _, f := range flagNames(fs) {
				known[envName(f)] = true
			}
		}
	}
	re := regexp.MustCompile(`"(ANP2_[A-Z0-9_]+)"`)
	seen := 0
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			seen++
			if !known[m[1]] {
				t.Errorf("%s reads %s, which is neither a flag's variable nor in envOnly (help.go)", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 10 {
		t.Fatalf("found only %d ANP2_ variables in the tree: is the walk rooted right?", seen)
	}
}

func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// TestErrorsSayWhatNext: a failing command's last line on stderr says
// what to do next.
func TestErrorsSayWhatNext(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k.key")
	if out, err := exec.Command(binary, "keygen", "--key", key).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"keygen", "--key", key}, "--force"},
		{[]string{"publish", "--key", filepath.Join(dir, "missing.key"), "--content", "x"}, "anp2 keygen"},
		{[]string{"publish", "--relay", "http://127.0.0.1:1", "--key", key, "--content", "x"}, "anp2 serve"},
		{[]string{"publish", "--no-such-flag"}, "anp2 help publish"},
		{[]string{"replay"}, "anp2 help replay"},
		{[]string{"import", "--db", filepath.Join(dir, "x.db"), filepath.Join(dir, "missing.jsonl")}, "check the path"},
		{[]string{"no-such-command"}, "anp2 help"},
	} {
		out, err := exec.Command(binary, c.args...).CombinedOutput()
		if err == nil {
			t.Errorf("anp2 %v succeeded, want a failure", c.args)
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if last := lines[len(lines)-1]; !strings.Contains(last, c.want) {
			t.Errorf("anp2 %v: last line %q does not say what to do next (want %q)", c.args, last, c.want)
		}
	}
}
