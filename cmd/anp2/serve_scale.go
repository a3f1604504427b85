package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/anp2net/relay/relay"
)

// scaleFlags are serve's flags for operating a large relay: the loopback
// profiling listener.
type scaleFlags struct {
	debugAddr  string
	stateDir   string
	stateEvery time.Duration

	debugSrv *http.Server
	// debugBound is the profiling listener's address once listening.
	debugBound string
}

func (f *scaleFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.stateDir, "state-dir", "", "directory of saved derived state, resumed at start (default <db>.state beside a SQLite log, none with PostgreSQL: give each process its own; none: fold the whole log at every start)")
	fs.DurationVar(&f.stateEvery, "state-every", 5*time.Minute, "also save the derived state this often while serving, when the log grew, so that a kill -9 refolds at most this much of the log at the next start (0: only at a clean stop); publishes wait only while the views are copied, not while they are encoded and written")
	fs.StringVar(&f.debugAddr, "debug-addr", "", "serve net/http/pprof on this loopback address, e.g. 127.0.0.1:6060, on a listener of its own (default off; other addresses are refused)")
}

// validate refuses a --debug-addr that is not a loopback IP literal or
// localhost: profiles expose memory contents and must not be public.
func (f *scaleFlags) validate() error {
	if f.stateEvery < 0 {
		return fmt.Errorf("--state-every %s is negative", f.stateEvery)
	}
	if f.debugAddr == "" {
		return nil
	}
	return loopbackOnly(f.debugAddr)
}

// stateDirFor returns the state directory for the log db ("" for none).
func (f *scaleFlags) stateDirFor(db string) (string, error) {
	if isPostgres(db) && f.stateDir == "" {
		return "", nil // no file beside the log to name it after (SPEC §2.1)
	}
	switch f.stateDir {
	case "none":
		return "", nil
	case "":
		return strings.TrimPrefix(db, "sqlite:") + ".state", nil
	}
	return f.stateDir, nil
}

// saveEvery saves srv's derived state every --state-every until ctx ends.
func (f *scaleFlags) saveEvery(ctx context.Context, srv *relay.Server, log *slog.Logger) {
	if f.stateEvery <= 0 {
		return
	}
	t := time.NewTicker(f.stateEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := srv.SaveState(); err != nil {
				log.Error("saving derived state", "err", err)
			}
		}
	}
}

// loopbackOnly returns an error unless addr is host:port with a loopback
// host (127.0.0.0/8, ::1, localhost).
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--debug-addr %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--debug-addr %q: the profiling listener takes a loopback address only (127.0.0.1:PORT, [::1]:PORT, localhost:PORT)", addr)
	}
	return nil
}

// debugMux serves net/http/pprof's handlers under /debug/pprof/.
func debugMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// startDebug listens on --debug-addr (when set) and serves the profiles
// there until closeDebug.
func (f *scaleFlags) startDebug(log *slog.Logger) error {
	if f.debugAddr == "" {
		return nil
	}
	if err := loopbackOnly(f.debugAddr); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.debugAddr)
	if err != nil {
		return fmt.Errorf("debug listener: %w", err)
	}
	// A CPU profile or trace streams for its seconds= parameter; the write
	// deadline bounds it.
	f.debugSrv = &http.Server{Handler: debugMux(), ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 5 * time.Minute}
	f.debugBound = ln.Addr().String()
	log.Info("profiling listener", "debug_addr", f.debugBound)
	go func() {
		if err := f.debugSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("profiling listener", "err", err)
		}
	}()
	return nil
}

// closeDebug stops the profiling listener.
func (f *scaleFlags) closeDebug() {
	if f.debugSrv != nil {
		f.debugSrv.Close()
		f.debugSrv = nil
	}
}
