package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/anp2net/relay/relay/delivery/pushload"
)

// benchPush measures SPEC §16's push target against an anp2 serve process
// of its own (or --relay): WebSocket subscribers and webhook triggers
// (to a receiver in this process), events published at a fixed rate
// with nobody listening and then with the listeners, side by side.
func (c *benchCmd) benchPush(ctx context.Context) error {
	base, relayCPU, relayWrites := c.relayURL, func() time.Duration { return 0 }, func() int64 { return 0 }
	if base == "" {
		dir, err := os.MkdirTemp("", "anp2-bench-push-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		// The receiver is on loopback: the relay must be allowed to call it.
		os.Setenv("ANP2_WEBHOOK_ALLOW_PRIVATE", "1")
		// Its triggers are registered without proof of work (SPEC §16):
		// the bench measures delivery, not mining.
		os.Setenv("ANP2_TRIGGER_POW", "0")
		exe := c.relayBin
		if exe == "" {
			exe = "this binary"
		}
		b, pid, stop, err := serveProcessOf(ctx, c.relayBin, filepath.Join(dir, "bench.db"))
		if err != nil {
			return err
		}
		defer stop()
		base, relayCPU, relayWrites = b, func() time.Duration { return procCPU(pid) }, func() int64 { return procWrites(pid) }
		fmt.Fprintf(c.out, "relay: its own anp2 serve process (%s, pid %d); this process only generates load\n", exe, pid)
	}
	fmt.Fprintf(c.out, "machine: %d CPUs (GOMAXPROCS %d), %s/%s, load average %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, loadAverage())
	res, err := pushload.Run(ctx, pushload.Options{
		Base: base, Subscribers: c.pushSubs, Triggers: c.pushTriggers, Rate: c.pushRate, Events: c.pushEvents, Topics: c.pushTopics,
		RelayCPU: relayCPU, RelayWrites: relayWrites, SelfCPU: cpuTime, MachineCPU: machineCPU,
		Progress: func(phase string, done, total int) { c.progress.step(phase, "%s: %d/%d", phase, done, total) },
	})
	c.progress.done()
	if err != nil {
		return err
	}
	if path := os.Getenv("ANP2_PUSH_TRACE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		err = res.WriteTrace(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("push trace: %w", err)
		}
	}
	res.Print(c.out)
	fmt.Fprintf(c.out, "  load average after: %s\n", loadAverage())
	return nil
}

// loadAverage is /proc/loadavg's three figures, or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(b) < 14 {
		return "?"
	}
	var a, m, f string
	fmt.Sscan(string(b), &a, &m, &f)
	return a + " " + m + " " + f
}

// machineCPU reads the machine's CPU time from /proc/stat's first line:
// busy (all but idle and iowait) and all, summed over the cores; 0, 0
// when it cannot be read.
func machineCPU() (busy, all time.Duration) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0
	}
	var sum, idle int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i >= 7 { // steal, guest, guest_nice: steal is not ours, guests are in user
			break
		}
		sum += n
		if i == 3 || i == 4 {
			idle += n
		}
	}
	tick := 10 * time.Millisecond
	return time.Duration(sum-idle) * tick, time.Duration(sum) * tick
}

// procWrites returns the bytes process pid has caused to be written to
// storage (Linux /proc/PID/io write_bytes), 0 when it cannot be read.
func procWrites(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
