// Package pgtest runs a real PostgreSQL server for tests: initdb into a
// temporary directory, the server on a free loopback port with its Unix
// socket in that directory, a fresh database per test, everything removed
// at the end. It finds the server in PG_BIN, else the newest
// /usr/lib/postgresql/<version>/bin (Debian's postgresql package), else
// the PATH; tests skip with a message saying how to install it when there
// is none. The server runs with fsync off: tests check what the relay
// does, not what the disk keeps over a power cut.
//
// PostgreSQL refuses to run as root: as root the server runs as the
// postgres user the Debian package creates.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running test server.
type Server struct {
	dir  string // data directory and socket directory's parent
	sock string
	port int
	cmd  *exec.Cmd
	cred *syscall.Credential
	n    atomic.Int64
}

var (
	shared    *Server
	sharedErr error
	once      sync.Once
)

// Main runs a package's tests (call it from TestMain) and stops the shared
// server, if a test started one.
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	return code
}

// DB returns the URL of a fresh, empty database on the package's shared
// server (started on first use; stopped by Main), dropped when t ends. It
// skips t when no PostgreSQL server binary is installed.
func DB(t testing.TB) string {
	t.Helper()
	once.Do(func() { shared, sharedErr = Start() })
	if sharedErr != nil {
		if skip, ok := sharedErr.(missingError); ok {
			t.Skip(string(skip))
		}
		t.Fatalf("start postgres: %v", sharedErr)
	}
	return shared.NewDB(t)
}

// missingError says the server binaries are absent (tests skip).
type missingError string

func (m missingError) Error() string { return string(m) }

// BinDir returns the directory holding initdb and postgres, or "" (also
// when PG_BIN names a directory without them).
func BinDir() string {
	if d := os.Getenv("PG_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return ""
		}
		return d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Start initialises a cluster in a new temporary directory and starts a
// server on it. The caller must Stop it.
func Start() (*Server, error) {
	bin := BinDir()
	if bin == "" {
		return nil, missingError("no PostgreSQL server found (set PG_BIN, or apt-get install postgresql): skipping the PostgreSQL tests")
	}
	s := &Server{}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, missingError("running as root and no postgres user to run the server as: skipping the PostgreSQL tests")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s.dir, s.sock = dir, filepath.Join(dir, "sock")
	if err := os.Mkdir(s.sock, 0o700); err != nil {
		return nil, err
	}
	if s.cred != nil {
		for _, p := range []string{dir, s.sock} {
			if err := os.Chown(p, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	data := filepath.Join(dir, "data")
	initdb := s.command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if s.port, err = freePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	s.cmd = s.command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+s.sock,
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "shared_buffers=128MB")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// The server dies with the test binary, however it ends.
	s.cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	logf.Close()
	if err := s.wait(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		s.Stop()
		return nil, fmt.Errorf("%w\n%s", err, log)
	}
	return s, nil
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// wait polls until the server accepts connections.
func (s *Server) wait() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		cancel()
		if err == nil {
			c.Close(context.Background())
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not start: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URL returns the connection URL of database db, over the Unix socket.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&port=%d&sslmode=disable", db, s.sock, s.port)
}

// TCPURL returns the connection URL of database db over loopback TCP.
func (s *Server) TCPURL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// NewDB creates a fresh database, dropped when t ends, and returns its URL.
func (s *Server) NewDB(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.n.Add(1))
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		if err != nil {
			return
		}
		defer c.Close(ctx)
		c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return s.URL(name)
}

// Stop shuts the server down (fast shutdown) and removes its directory.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			s.cmd.Process.Kill()
			<-done
		}
	}
	if !strings.HasPrefix(filepath.Base(s.dir), "pgtest-") {
		return
	}
	os.RemoveAll(s.dir)
}
