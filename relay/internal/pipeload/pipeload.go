// Package pipeload drives a relay's publish path the way the in-process
// publish benchmarks measure it: prepared HTTP/1.1 requests written over a
// few kept-alive connections, each answer read before the next request,
// and the CPU time of the whole process (relay and load alike) counted.
package pipeload

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ProcessCPU is the user and system CPU this process has used.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Post writes reqs (whole HTTP/1.1 requests) to host over conns
// connections, taking them in order, and passes each answer's status line
// and body to check. It returns the process CPU time the run took and the
// first error (a dial, write or read failure, or check's).
func Post(host string, reqs [][]byte, conns int, check func(status, body []byte) error) (time.Duration, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var first error
	fail := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if first == nil {
			first = err
		}
	}
	cpu0 := ProcessCPU()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", host)
			if err != nil {
				fail(err)
				return
			}
			defer nc.Close()
			br := bufio.NewReader(nc)
			for {
				i := int(next.Add(1) - 1)
				if i >= len(reqs) {
					return
				}
				if _, err := nc.Write(reqs[i]); err != nil {
					fail(err)
					return
				}
				status, body, err := readAnswer(br)
				if err == nil {
					err = check(status, body)
				}
				if err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return ProcessCPU() - cpu0, first
}

// readAnswer reads one HTTP/1.1 answer that has a Content-Length.
func readAnswer(br *bufio.Reader) (status, body []byte, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return nil, nil, err
	}
	status = bytes.Clone(line)
	n := -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return nil, nil, err
		}
		if len(line) <= 2 {
			break
		}
		if v, found := bytes.CutPrefix(line, []byte("Content-Length: ")); found {
			n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	if n < 0 || n > 1<<20 {
		return nil, nil, fmt.Errorf("answer without a Content-Length up to 1 MiB: %q", status)
	}
	body = make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return nil, nil, err
	}
	return status, body, nil
}

// OK accepts a 200 answer.
func OK(status, body []byte) error {
	if !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("%q %q", status, body)
	}
	return nil
}
