package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	binenc "encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	rtlog "github.com/anp2net/relay/relay/tlog"

	"github.com/anp2net/relay/protocol"
)

// auditCmd checks a relay's transparency log (SPEC §21) from the outside,
// with nothing but HTTP and the C2SP formats: the checkpoint's signature,
// its consistency with the checkpoint seen last time (kept in --state),
// that the entries hash to its root, and that /export gives exactly those
// ids in that order. It keeps O(log n) hashes in memory.
type auditCmd struct {
	out      io.Writer
	progress *progress
	base     string
	state    string
	key      string
	witness  listFlag
	http     *http.Client
}

// auditState is what --state keeps between two audits.
type auditState struct {
	Key        string `json:"key"`
	Checkpoint string `json:"checkpoint"`
}

// auditFailure names what an audit found wrong (a non-zero exit).
type auditFailure struct{ what string }

func (e *auditFailure) Error() string { return "audit failed: " + e.what }

func failf(format string, args ...any) error {
	return &auditFailure{fmt.Sprintf(format, args...)}
}

func (c *auditCmd) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.StringVar(&c.state, "state", "", "file keeping the last verified checkpoint (and the relay's key) between audits")
	fs.StringVar(&c.key, "key", "", "the relay's note verifier key (name+hash+key) to trust (default: the one in --state, else the relay's GET /tlog/key)")
	fs.Var(&c.witness, "witness", "the cosigner key (GET /tlog/witness/key) of a witness whose cosignature the checkpoint must carry (repeatable)")
	const usage = "usage: anp2 audit URL [--state FILE] [--key VKEY] [--witness VKEY]…"
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		return errors.New(usage)
	}
	c.base = strings.TrimRight(fs.Arg(0), "/")
	if err := fs.Parse(fs.Args()[1:]); err != nil || fs.NArg() > 0 {
		return errors.New(usage)
	}
	return nil
}

func (c *auditCmd) Run(ctx context.Context) error {
	if c.http == nil {
		c.http = &http.Client{Timeout: 5 * time.Minute}
	}
	var prev auditState
	if c.state != "" {
		b, err := os.ReadFile(c.state)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err == nil {
			if err := json.Unmarshal(b, &prev); err != nil {
				return fmt.Errorf("state %s: %w", c.state, err)
			}
		}
	}
	v, vkey, err := c.verifier(ctx, prev.Key)
	if err != nil {
		return err
	}
	raw, err := c.get(ctx, "/tlog/checkpoint")
	if err != nil {
		return err
	}
	size, root, err := openCheckpoint(raw, v)
	if err != nil {
		return failf("checkpoint signature: %v", err)
	}
	fmt.Fprintf(c.out, "checkpoint: %s, %d entries, signature ok\n", v.Name(), size)
	if err := c.cosigned(raw, v); err != nil {
		return err
	}
	if prev.Checkpoint != "" {
		if err := c.consistent(ctx, prev.Checkpoint, v, size, root); err != nil {
			return err
		}
	}
	if err := c.entries(ctx, size, root); err != nil {
		return err
	}
	if c.state != "" {
		b, _ := json.MarshalIndent(auditState{Key: vkey, Checkpoint: string(raw)}, "", "  ")
		if err := os.WriteFile(c.state, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(c.out, "ok: %d entries, root %s\n", size, base64.StdEncoding.EncodeToString(root[:]))
	return nil
}

// verifier returns the note verifier to trust: --key, else the saved
// one, else the relay's own. A relay key that changed since is a failure.
func (c *auditCmd) verifier(ctx context.Context, saved string) (note.Verifier, string, error) {
	vkey := c.key
	if vkey == "" {
		vkey = saved
	}
	if vkey == "" {
		b, err := c.get(ctx, "/tlog/key")
		if err != nil {
			return nil, "", err
		}
		vkey = strings.TrimSpace(string(b))
	} else if saved != "" && vkey != saved {
		return nil, "", failf("the relay key %s is not the one in the state file (%s)", vkey, saved)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, "", failf("relay key %q: %v", vkey, err)
	}
	return v, vkey, nil
}

// openCheckpoint verifies a checkpoint note with v and returns its size
// and root (its origin must be the key's name).
func openCheckpoint(raw []byte, v note.Verifier) (int64, tlog.Hash, error) {
	n, err := note.Open(raw, note.VerifierList(v))
	if err != nil {
		return 0, tlog.Hash{}, err
	}
	origin, size, root, err := rtlog.ParseCheckpoint(n.Text)
	if err != nil {
		return 0, tlog.Hash{}, err
	}
	if origin != v.Name() {
		return 0, tlog.Hash{}, fmt.Errorf("origin %q is not the key's name %q", origin, v.Name())
	}
	return size, root, nil
}

// cosigned checks the checkpoint carries a valid cosignature of every
// --witness.
func (c *auditCmd) cosigned(raw []byte, v note.Verifier) error {
	for _, k := range c.witness {
		w, err := newCosigVerifier(k)
		if err != nil {
			return err
		}
		n, err := note.Open(raw, note.VerifierList(v, w))
		if err != nil {
			return failf("checkpoint: %v", err)
		}
		found := false
		for _, s := range n.Sigs {
			found = found || (s.Name == w.Name() && s.Hash == w.KeyHash())
		}
		if !found {
			return failf("the checkpoint carries no cosignature of witness %s", w.Name())
		}
		fmt.Fprintf(c.out, "cosigned by witness %s\n", w.Name())
	}
	return nil
}

// cosigVerifier verifies C2SP tlog-cosignature/v1 signatures: Ed25519
// over "cosignature/v1\ntime <t>\n" and the note text, the signature
// being the 8-byte big-endian t and the Ed25519 signature.
type cosigVerifier struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
}

func (v cosigVerifier) Name() string    { return v.name }
func (v cosigVerifier) KeyHash() uint32 { return v.hash }
func (v cosigVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	signed := append(fmt.Appendf(nil, "cosignature/v1\ntime %d\n", binenc.BigEndian.Uint64(sig)), msg...)
	return ed25519.Verify(v.pub, signed, sig[8:])
}

// newCosigVerifier parses a witness key: name+hash+base64(0x04 ‖ public
// key), hash the first 4 bytes of SHA-256(name ‖ "\n" ‖ 0x04 ‖ key).
func newCosigVerifier(vkey string) (note.Verifier, error) {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 || len(parts[1]) != 8 {
		return nil, fmt.Errorf("witness key %q: want name+hash+key", vkey)
	}
	h, err := strconv.ParseUint(parts[1], 16, 32)
	key, err2 := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || err2 != nil || len(key) != 1+ed25519.PublicKeySize || key[0] != 4 {
		return nil, fmt.Errorf("witness key %q: not an Ed25519 cosignature key", vkey)
	}
	id := sha256.Sum256(append([]byte(parts[0]+"\n"), key...))
	if uint32(h) != binenc.BigEndian.Uint32(id[:]) {
		return nil, fmt.Errorf("witness key %q: wrong key hash", vkey)
	}
	return cosigVerifier{name: parts[0], hash: uint32(h), pub: key[1:]}, nil
}

// consistent checks the checkpoint (size, root) extends the saved one.
func (c *auditCmd) consistent(ctx context.Context, saved string, v note.Verifier, size int64, root tlog.Hash) error {
	m, mroot, err := openCheckpoint([]byte(saved), v)
	if err != nil {
		return fmt.Errorf("state file checkpoint: %w", err)
	}
	if m > size {
		return failf("the log shrank: %d entries now, %d at the last audit", size, m)
	}
	if m == 0 || (m == size && mroot == root) {
		return nil
	}
	if m == size {
		return failf("the checkpoint of %d entries has another root than the one seen at the last audit (the past was rewritten or a different history shown)", size)
	}
	b, err := c.get(ctx, fmt.Sprintf("/tlog/consistency?from=%d&to=%d", m, size))
	if err != nil {
		return err
	}
	if err := rtlog.CheckConsistencyAnswer(b, m, mroot, size, root); errors.Is(err, rtlog.ErrInconsistent) {
		return failf("the checkpoint of %d entries is not consistent with the one of %d seen at the last audit (the past was rewritten or a different history shown): %v", size, m, err)
	} else if err != nil {
		return failf("%v", err)
	}
	fmt.Fprintf(c.out, "consistent with the last audit's checkpoint (%d entries)\n", m)
	return nil
}

// frontier is the right edge of an RFC 6962 tree built leaf by leaf: the
// roots of its complete subtrees, largest first (O(log n) hashes).
type frontier struct {
	hashes []tlog.Hash
	levels []int
}

func (f *frontier) add(entry []byte) {
	h, l := tlog.RecordHash(entry), 0
	for n := len(f.levels); n > 0 && f.levels[n-1] == l; n-- {
		h, l = tlog.NodeHash(f.hashes[n-1], h), l+1
		f.hashes, f.levels = f.hashes[:n-1], f.levels[:n-1]
	}
	f.hashes, f.levels = append(f.hashes, h), append(f.levels, l)
}

func (f *frontier) root() tlog.Hash {
	if len(f.hashes) == 0 {
		return tlog.RecordHash(nil) // unused: TreeHash(0) is SHA-256("")
	}
	r := f.hashes[len(f.hashes)-1]
	for i := len(f.hashes) - 2; i >= 0; i-- {
		r = tlog.NodeHash(f.hashes[i], r)
	}
	return r
}

// entries reads the entry bundles of the tree of size entries and the
// relay's export through the same point side by side, and checks they
// name the same ids in the same order and that the entries hash to root.
func (c *auditCmd) entries(ctx context.Context, size int64, root tlog.Hash) error {
	export, err := c.export(ctx)
	if err != nil {
		return err
	}
	defer export.Close()
	lines := bufio.NewReaderSize(export, 1<<20)
	var f frontier
	var wh withheldEntries
	start := time.Now()
	for n := int64(0); n*256 < size; n++ {
		w := min(256, size-n*256)
		b, err := c.get(ctx, "/tlog/"+entriesPath(n, w))
		if err != nil {
			return err
		}
		for i := int64(0); i < w; i++ {
			if len(b) < 2 || int(binenc.BigEndian.Uint16(b)) > len(b)-2 {
				return failf("entry bundle %d is truncated at entry %d", n, i)
			}
			l := int(binenc.BigEndian.Uint16(b))
			entry := b[2 : 2+l]
			b = b[2+l:]
			at := n*256 + i
			f.add(entry)
			seq, id, ev, err := nextExportLine(lines)
			if err != nil {
				return failf("/export ends or breaks before entry %d: %v", at, err)
			}
			wh.note(at, ev)
			if seq != at+1 {
				return failf("entry %d is %x but /export gives seq %d there: the log has a gap", at, entry, seq)
			}
			if id != hex.EncodeToString(entry) {
				return failf("entry %d is %x but /export gives %s there", at, entry, id)
			}
		}
		if len(b) != 0 {
			return failf("entry bundle %d has bytes after its %d entries", n, w)
		}
		c.progress.update("audit: %d/%d entries (%.0f/s)", (n+1)*256, size, float64((n+1)*256)/time.Since(start).Seconds())
	}
	c.progress.done()
	// The log may have grown since; but its next event must be the next
	// entry (a gap stops a relay's tree there, SPEC §21.1).
	if err := wh.report(c.out); err != nil {
		return err
	}
	if seq, _, err := nextExportID(lines); err == nil && seq != size+1 {
		return failf("the log's next event after the checkpoint's %d entries has seq %d: the log has a gap and the tree stopped before it", size, seq)
	} else if err != nil && err != io.EOF {
		return failf("/export breaks after entry %d: %v", size, err)
	}
	if got := f.root(); size > 0 && got != root {
		return failf("the entries hash to %s, not the checkpoint's root %s", base64.StdEncoding.EncodeToString(got[:]), base64.StdEncoding.EncodeToString(root[:]))
	}
	fmt.Fprintf(c.out, "entries hash to the root; /export gives the same %d ids in the same order\n", size)
	return nil
}

// entriesPath is the C2SP path of the entry bundle n of w entries.
func entriesPath(n, w int64) string {
	p := tlog.Tile{H: 8, L: -1, N: n, W: int(w)}.Path() // tile/8/data/…
	return "tile/entries/" + strings.TrimPrefix(p, "tile/8/data/")
}

// nextExportID reads the seq and event id of the next line of an export
// with seq=true (io.EOF at its end).
func nextExportID(r *bufio.Reader) (int64, string, error) {
	seq, id, _, err := nextExportLine(r)
	return seq, id, err
}

// nextExportLine is nextExportID that also returns the line's event (a
// tombstone's too, SPEC §21.8).
func nextExportLine(r *bufio.Reader) (int64, string, json.RawMessage, error) {
	line, err := r.ReadBytes('\n')
	if len(line) == 0 {
		return 0, "", nil, err
	}
	var l struct {
		Seq   int64           `json:"seq"`
		Event json.RawMessage `json:"event"`
	}
	var ev struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		return 0, "", nil, fmt.Errorf("line %.200q: %w", line, err)
	}
	if err := json.Unmarshal(l.Event, &ev); err != nil {
		return 0, "", nil, fmt.Errorf("line %.200q: %w", line, err)
	}
	return l.Seq, ev.ID, l.Event, nil
}

// export opens the relay's /export with seqs, as an authenticated reader
// (a key of this run: hidden events included).
func (c *auditCmd) export(ctx context.Context) (io.ReadCloser, error) {
	u := c.base + "/export?seq=true"
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", protocol.HTTPAuth(priv, http.MethodGet, u, nil, time.Now().Unix()))
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET /export: %s", resp.Status)
	}
	return resp.Body, nil
}

// get fetches path from the relay (a 200 body, else an error).
func (c *auditCmd) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, failf("GET %s: %s %s", path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}
