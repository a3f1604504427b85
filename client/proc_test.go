package client_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The tests in this file run real `anp2 serve` processes, built once per
// test binary the first time one is needed.

var (
	buildOnce sync.Once
	binDir    string
	binErr    error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildCmd builds the main package at pkg (relative to the module root)
// into the shared temporary directory and returns the binary's path.
func buildCmd(t *testing.T, pkg, name string) string {
	t.Helper()
	buildOnce.Do(func() { binDir, binErr = os.MkdirTemp("", "anp2-sdk-") })
	if binErr != nil {
		t.Fatal(binErr)
	}
	out := filepath.Join(binDir, name)
	if _, err := os.Stat(out); err == nil {
		return out
	}
	if b, err := exec.Command("go", "build", "-o", out, "../"+pkg).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// relayProc is a real relay process serving one database on one port.
type relayProc struct {
	t    *testing.T
	db   string
	port int
	cmd  *exec.Cmd
}

var listenRe = regexp.MustCompile(`relay listening"? addr=(\S+)`)

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startRelayProc runs `anp2 serve` over a fresh database in a temporary
// directory, without rate limits, on a port of its own.
func startRelayProc(t *testing.T) *relayProc {
	p := &relayProc{t: t, db: filepath.Join(t.TempDir(), "relay.db"), port: freePort(t)}
	p.start()
	t.Cleanup(p.kill)
	return p
}

// URL is the relay's base URL.
func (p *relayProc) URL() string { return "http://127.0.0.1:" + strconv.Itoa(p.port) }

// start runs the process (again) on its database and port and waits until
// it listens.
func (p *relayProc) start() {
	t := p.t
	t.Helper()
	bin := buildCmd(t, "cmd/anp2", "anp2")
	cmd := exec.Command(bin, "serve", "--addr", fmt.Sprintf("127.0.0.1:%d", p.port), "--db", p.db,
		"--rate-agent", "0", "--rate-ip", "0")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if listenRe.MatchString(sc.Text()) {
				found <- true
				break
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case <-found:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("relay did not start")
	}
	p.cmd = cmd
}

// kill ends the process with SIGKILL, as a crash would.
func (p *relayProc) kill() {
	if p.cmd != nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		p.cmd = nil
	}
}
