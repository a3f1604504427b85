package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	rtlog "github.com/anp2net/relay/relay/tlog"
)

// errTreeMismatch is returned when --compare finds that the replayed log
// does not hash to the relay's signed checkpoint (SPEC §21).
var errTreeMismatch = errors.New("transparency log mismatch")

// verifyTree checks that the replayed log (path, JSON lines in seq order)
// is the log the compared relay signed: its entries (the ids, in order)
// hash to the root of the relay's signed checkpoint of the same size.
// When the replay holds fewer entries than the checkpoint, a consistency
// proof from the relay links the replay's root to the signed one; when it
// holds more, the root of its first checkpoint-size entries is compared.
// A relay without /tlog is reported, not failed.
func (c *replayCmd) verifyTree(ctx context.Context, path string) error {
	a := &auditCmd{base: strings.TrimRight(c.compare, "/"), http: &http.Client{Timeout: time.Minute}}
	v, _, err := a.verifier(ctx, "")
	var af *auditFailure
	if errors.As(err, &af) && strings.Contains(af.what, "404") {
		fmt.Fprintf(c.out, "tree: not checked (%s serves no /tlog)\n", c.compare)
		return nil
	}
	if err != nil {
		return err
	}
	raw, err := a.get(ctx, "/tlog/checkpoint")
	if err != nil {
		return err
	}
	size, root, err := openCheckpoint(raw, v)
	if err != nil {
		fmt.Fprintf(c.out, "TREE MISMATCH: the checkpoint of %s does not verify under its key %s: %v\n", c.compare, v.Name(), err)
		return errTreeMismatch
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var tree frontier
	var n int64
	var atSize tlog.Hash
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var e struct {
			ID string `json:"id"`
		}
		id, derr := []byte(nil), json.Unmarshal(line, &e)
		if derr == nil {
			id, derr = hex.DecodeString(e.ID)
		}
		if derr != nil || len(id) != 32 {
			fmt.Fprintf(c.out, "TREE MISMATCH: line %d of the replayed log has no event id\n", n+1)
			return errTreeMismatch
		}
		tree.add(id)
		if n++; n == size {
			atSize = tree.root()
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	b64 := func(h tlog.Hash) string { return base64.StdEncoding.EncodeToString(h[:]) }
	switch {
	case n == 0 || size == 0:
		fmt.Fprintf(c.out, "tree: nothing to check (replay %d entries, checkpoint %d)\n", n, size)
	case n >= size:
		if atSize != root {
			fmt.Fprintf(c.out, "TREE MISMATCH: the first %d replayed entries hash to %s, %s signed %s for that size\n",
				size, b64(atSize), v.Name(), b64(root))
			return errTreeMismatch
		}
		fmt.Fprintf(c.out, "tree: the first %d of %d replayed entries hash to the root of %s's signed checkpoint (%s)\n",
			size, n, v.Name(), b64(root))
	default:
		mine := tree.root()
		b, err := a.get(ctx, fmt.Sprintf("/tlog/consistency?from=%d&to=%d", n, size))
		if err != nil {
			return err
		}
		if err := rtlog.CheckConsistencyAnswer(b, n, mine, size, root); errors.Is(err, rtlog.ErrInconsistent) {
			fmt.Fprintf(c.out, "TREE MISMATCH: the %d replayed entries hash to %s, which %s's signed checkpoint of %d entries does not extend: %v\n",
				n, b64(mine), v.Name(), size, err)
			return errTreeMismatch
		} else if err != nil {
			return err
		}
		fmt.Fprintf(c.out, "tree: the %d replayed entries hash to %s, proven a prefix of %s's signed checkpoint of %d entries\n",
			n, b64(mine), v.Name(), size)
	}
	return nil
}
