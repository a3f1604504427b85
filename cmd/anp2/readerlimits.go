package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/anp2net/relay/relay/stream"
	"github.com/anp2net/relay/relay/ws"
)

// readerLimits reads the readers' budgets (SPEC §20.3) from the
// environment; an unset variable keeps the module's default:
//
//	ANP2_WS_REQ_ROWS               stored rows one WebSocket connection's REQs may read a minute (10000)
//	ANP2_WS_REQ_ROWS_PER_ADDR      the same for one client address, IPv6 by /64 (50000)
//	ANP2_WS_QUEUE_BYTES            bytes waiting for one WebSocket connection (4 MiB)
//	ANP2_WS_QUEUE_BYTES_TOTAL      bytes waiting for all WebSocket connections (128 MiB)
//	ANP2_STREAM_QUEUE_BYTES        bytes waiting for one GET /stream reader (4 MiB)
//	ANP2_STREAM_QUEUE_BYTES_TOTAL  bytes waiting for all GET /stream readers (128 MiB)
//	ANP2_STREAM_REPLAY_ROWS        stored rows one client address's resumed streams may read a minute (50000)
//
// It fails on a value that is not a positive integer.
func readerLimits() (stream.ModuleOptions, ws.Options, error) {
	var so stream.ModuleOptions
	var wo ws.Options
	for _, v := range []struct {
		name string
		dst  *int64
	}{
		{"ANP2_WS_QUEUE_BYTES", &wo.QueueBytes},
		{"ANP2_WS_QUEUE_BYTES_TOTAL", &wo.TotalQueueBytes},
		{"ANP2_STREAM_QUEUE_BYTES", &so.QueueBytes},
		{"ANP2_STREAM_QUEUE_BYTES_TOTAL", &so.TotalBytes},
	} {
		n, err := envPositive(v.name)
		if err != nil {
			return so, wo, err
		}
		*v.dst = n
	}
	for _, v := range []struct {
		name string
		dst  *int
	}{
		{"ANP2_WS_REQ_ROWS", &wo.ReqRows},
		{"ANP2_WS_REQ_ROWS_PER_ADDR", &wo.ReqRowsPerAddr},
		{"ANP2_STREAM_REPLAY_ROWS", &so.ReplayRows},
	} {
		n, err := envPositive(v.name)
		if err != nil {
			return so, wo, err
		}
		*v.dst = int(n)
	}
	return so, wo, nil
}

// envPositive returns the positive integer in variable name, 0 when it
// is unset.
func envPositive(name string) (int64, error) {
	s, ok := os.LookupEnv(name)
	if !ok || s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > 1<<40 {
		return 0, fmt.Errorf("%s: want a positive integer, got %q", name, s)
	}
	return n, nil
}
