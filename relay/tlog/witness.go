package tlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
)

// A Witness is a peer this relay asks to cosign its checkpoints (C2SP
// tlog-witness): its base URL and its cosigner key (GET /tlog/witness/key).
type Witness struct {
	URL, Key string
}

// witnessed is the latest checkpoint the witness verified for one log.
type witnessed struct {
	Size int64  `json:"size"`
	Root []byte `json:"root"`
	Note string `json:"note"`
}

// Alarm is evidence of a log showing an inconsistent view: the checkpoint
// the witness had verified and a signed one that cannot extend it.
type Alarm struct {
	Origin string `json:"origin"`
	At     int64  `json:"at"`
	Old    string `json:"old"`
	New    string `json:"new"`
	Detail string `json:"detail"`
}

// maxAlarms bounds the alarms kept (the first ones: the evidence).
const maxAlarms = 64

// witnessState is the witness's memory, kept in <tree file>.witness.
type witnessState struct {
	Logs   map[string]*witnessed `json:"logs"`
	Alarms []Alarm               `json:"alarms"`
	// Keys are the log keys learned from observed peers (trust on first
	// use), by origin.
	Keys map[string]string `json:"keys,omitempty"`
}

// witness is the witness side: the logs it knows and what it verified.
type witness struct {
	cosigner *cosigner
	// logs are the logs witnessed, by origin (mu).
	logs map[string]note.Verifier
	path string
	// reports carries new alarms to Run, which publishes them (bounded:
	// alarms past it are kept in the state file only).
	reports chan Alarm
	// mu guards state and its file.
	mu     sync.Mutex
	state  witnessState
	alarms atomic.Int64
}

func newWitness(c *cosigner, vkeys []string, path string) (*witness, error) {
	w := &witness{cosigner: c, logs: map[string]note.Verifier{}, path: path, reports: make(chan Alarm, 16),
		state: witnessState{Logs: map[string]*witnessed{}}}
	for _, k := range vkeys {
		v, err := note.NewVerifier(k)
		if err != nil {
			return nil, fmt.Errorf("witnessed log key %q: %w", k, err)
		}
		w.logs[v.Name()] = v
	}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &w.state); err != nil {
			return nil, fmt.Errorf("witness state %s: %w", path, err)
		}
		if w.state.Logs == nil {
			w.state.Logs = map[string]*witnessed{}
		}
		for origin, k := range w.state.Keys {
			if v, err := note.NewVerifier(k); err == nil && v.Name() == origin && w.logs[origin] == nil {
				w.logs[origin] = v
			}
		}
	}
	w.alarms.Store(int64(len(w.state.Alarms)))
	return w, nil
}

// maxAddCheckpoint bounds an add-checkpoint body: a checkpoint, its
// signatures and a proof of at most 63 hashes.
const maxAddCheckpoint = 16 << 10

// witnessError is an add-checkpoint answer other than 200 (C2SP
// tlog-witness statuses, plain text).
type witnessError struct {
	status int
	body   string
}

// witnessRate bounds the add-checkpoint requests of one client address
// (the core's ClientKey: an IPv6 client by its network) per minute: each costs a signature check.
const witnessRate = 600

// addCheckpoint handles POST /tlog/witness/add-checkpoint.
func (m *Module) addCheckpoint(c echo.Context) error {
	if ok, wait := m.witnessLimit.AllowN(m.core.ClientKey(c), time.Now(), 1); !ok {
		c.Response().Header().Set("Retry-After", strconv.Itoa(wait))
		return c.String(http.StatusTooManyRequests, "rate limited\n")
	}
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, maxAddCheckpoint+1))
	if err != nil {
		return c.String(http.StatusBadRequest, "cannot read body\n")
	}
	if len(body) > maxAddCheckpoint {
		return c.String(http.StatusRequestEntityTooLarge, "body too large\n")
	}
	sigs, werr := m.witness.add(body)
	if werr != nil {
		if werr.status == http.StatusConflict {
			return c.Blob(werr.status, "text/x.tlog.size", []byte(werr.body))
		}
		return c.String(werr.status, werr.body)
	}
	return c.Blob(http.StatusOK, "text/plain; charset=utf-8", sigs)
}

// parseAddCheckpoint splits an add-checkpoint body: "old <size>", the
// consistency proof's hashes (base64, one a line), an empty line, the
// checkpoint note.
func parseAddCheckpoint(body []byte) (old int64, proof tlog.TreeProof, ckpt []byte, err error) {
	head, ckpt, ok := bytes.Cut(body, []byte("\n\n"))
	if !ok {
		return 0, nil, nil, errors.New("no empty line before the checkpoint")
	}
	lines := strings.Split(string(head), "\n")
	v, ok := strings.CutPrefix(lines[0], "old ")
	if old, err = strconv.ParseInt(v, 10, 64); !ok || err != nil || old < 0 || strconv.FormatInt(old, 10) != v {
		return 0, nil, nil, errors.New(`first line is not "old <size>"`)
	}
	if len(lines)-1 > 63 {
		return 0, nil, nil, errors.New("proof longer than 63 hashes")
	}
	for _, l := range lines[1:] {
		h, err := base64.StdEncoding.Strict().DecodeString(l)
		if err != nil || len(h) != tlog.HashSize {
			return 0, nil, nil, fmt.Errorf("proof line %q is not a base64 hash", l)
		}
		proof = append(proof, tlog.Hash(h))
	}
	return old, proof, ckpt, nil
}

// add verifies a checkpoint submitted to the witness and returns its
// cosignature lines, or the status and text to answer.
func (w *witness) add(body []byte) ([]byte, *witnessError) {
	old, proof, raw, err := parseAddCheckpoint(body)
	if err != nil {
		return nil, &witnessError{http.StatusBadRequest, err.Error() + "\n"}
	}
	text, _, _ := bytes.Cut(raw, []byte("\n\n"))
	origin, size, root, err := ParseCheckpoint(string(text) + "\n")
	if err != nil {
		return nil, &witnessError{http.StatusBadRequest, "malformed checkpoint\n"}
	}
	w.mu.Lock()
	v := w.logs[origin]
	w.mu.Unlock()
	if v == nil {
		return nil, &witnessError{http.StatusNotFound, "unknown log\n"}
	}
	n, err := note.Open(raw, note.VerifierList(v))
	if err != nil {
		return nil, &witnessError{http.StatusForbidden, "checkpoint signature does not verify\n"}
	}
	if old > size {
		return nil, &witnessError{http.StatusBadRequest, "old size above the checkpoint's\n"}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	prev := w.state.Logs[origin]
	if prev == nil {
		prev = &witnessed{}
	}
	if old != prev.Size {
		return nil, &witnessError{http.StatusConflict, fmt.Sprintf("%d\n", prev.Size)}
	}
	if err := consistent(prev, size, root, proof); err != nil {
		w.alarm(origin, prev.Note, string(raw), err.Error())
		return nil, &witnessError{http.StatusUnprocessableEntity, "not consistent with the checkpoint this witness verified: " + err.Error() + "\n"}
	}
	w.state.Logs[origin] = &witnessed{Size: size, Root: root[:], Note: string(raw)}
	if err := w.save(); err != nil {
		return nil, &witnessError{http.StatusServiceUnavailable, "cannot save the witness's state\n"}
	}
	signed, err := note.Sign(&note.Note{Text: n.Text}, w.cosigner)
	if err != nil {
		return nil, &witnessError{http.StatusServiceUnavailable, "cannot cosign\n"}
	}
	_, sigs, _ := bytes.Cut(signed, []byte("\n\n"))
	return sigs, nil
}

// consistent checks (size, root) extends prev with proof.
func consistent(prev *witnessed, size int64, root tlog.Hash, proof tlog.TreeProof) error {
	switch {
	case prev.Size == 0:
		return nil
	case prev.Size == size:
		if tlog.Hash(prev.Root) != root || len(proof) != 0 {
			return errors.New("same size, another root")
		}
		return nil
	}
	return tlog.CheckTree(proof, size, root, prev.Size, tlog.Hash(prev.Root))
}

// alarm keeps the evidence of an inconsistent checkpoint (mu held).
func (w *witness) alarm(origin, old, new, detail string) {
	w.alarms.Add(1)
	if len(w.state.Alarms) < maxAlarms {
		a := Alarm{Origin: origin, At: time.Now().Unix(), Old: old, New: new, Detail: detail}
		w.state.Alarms = append(w.state.Alarms, a)
		w.save()
		select {
		case w.reports <- a: // published by Run as a kind 24
		default:
		}
	}
}

// KindTlogAlarm is the relay-signed report of an inconsistent checkpoint
// (SPEC §21.5): content {"origin","old","new","detail"}, the two signed
// checkpoint notes that cannot both be true.
const KindTlogAlarm = 24

// publishAlarm stores a's report, signed by the relay key, in the log.
func (m *Module) publishAlarm(ctx context.Context, core *relay.Server, a Alarm) {
	content, _ := json.Marshal(map[string]string{"origin": a.Origin, "old": a.Old, "new": a.New, "detail": a.Detail})
	e := &protocol.Event{CreatedAt: core.Now(), Kind: KindTlogAlarm, Content: string(content),
		Tags: [][]string{{"t", "tlog-alarm"}, {"origin", a.Origin}}}
	e.Sign(m.key)
	if _, rejected, err := core.IngestMirrored(ctx, []*protocol.Event{e}); err != nil || rejected > 0 {
		m.logger.Error("tlog: alarm report not stored", "origin", a.Origin, "rejected", rejected, "err", err)
		return
	}
	m.logger.Error("tlog: inconsistent checkpoint witnessed; report published", "origin", a.Origin, "event", e.ID, "detail", a.Detail)
}

// save writes the state (mu held).
func (w *witness) save() error {
	b, err := json.Marshal(&w.state)
	if err != nil {
		return err
	}
	return writeFileAtomic(w.path, b)
}

// askWitnesses asks every configured witness to cosign c and serves c
// with the cosignatures that verify. Each witness gets witnessTimeout.
func (m *Module) askWitnesses(ctx context.Context, c *Checkpoint) {
	var lines [][]byte
	for i, wt := range m.opts.Witnesses {
		sig, err := m.askWitness(ctx, i, wt, c)
		if err != nil {
			m.logger.Warn("tlog: witness did not cosign", "witness", wt.URL, "size", c.Size, "err", err)
			continue
		}
		lines = append(lines, sig)
	}
	if len(lines) == 0 {
		return
	}
	cos := *c
	cos.Note = bytes.Join(append([][]byte{c.Note}, lines...), nil)
	m.latest.CompareAndSwap(c, &cos)
}

// witnessTimeout bounds one add-checkpoint request.
const witnessTimeout = 5 * time.Second

// askWitness submits c to witness i and returns its verified cosignature
// line. On a 409 it retries once from the size the witness names.
func (m *Module) askWitness(ctx context.Context, i int, wt Witness, c *Checkpoint) ([]byte, error) {
	v, err := NewCosignVerifier(wt.Key)
	if err != nil {
		return nil, err
	}
	old := m.cosigned[i].Load()
	for try := 0; try < 2; try++ {
		if old > c.Size {
			return nil, fmt.Errorf("the witness has verified %d entries, more than this tree's %d", old, c.Size)
		}
		body := fmt.Appendf(nil, "old %d\n", old)
		if old > 0 && old < c.Size {
			p, err := tlog.ProveTree(c.Size, old, m.tree)
			if err != nil {
				return nil, err
			}
			for _, h := range p {
				body = append(body, base64.StdEncoding.EncodeToString(h[:])+"\n"...)
			}
		}
		body = append(append(body, '\n'), c.Note...)
		status, answer, err := postWitness(ctx, wt.URL, body)
		if err != nil {
			return nil, err
		}
		if status == http.StatusConflict {
			if old, err = strconv.ParseInt(strings.TrimSpace(string(answer)), 10, 64); err != nil || old < 0 {
				return nil, fmt.Errorf("409 without a size")
			}
			continue
		}
		if status != http.StatusOK {
			return nil, fmt.Errorf("%d %s", status, bytes.TrimSpace(answer))
		}
		// The cosignature must verify over this checkpoint's text.
		text, _, _ := bytes.Cut(c.Note, []byte("\n\n"))
		if _, err := note.Open(append(append(text, "\n\n"...), answer...), note.VerifierList(v)); err != nil {
			return nil, fmt.Errorf("cosignature: %w", err)
		}
		m.cosigned[i].Store(c.Size)
		return firstLine(answer), nil
	}
	return nil, errors.New("the witness's size kept changing")
}

func firstLine(b []byte) []byte {
	sc := bufio.NewScanner(bytes.NewReader(b))
	if sc.Scan() {
		return append(sc.Bytes(), '\n')
	}
	return nil
}

// postWitness posts an add-checkpoint body and returns the status and
// (at most 16 KiB of) the answer.
func postWitness(ctx context.Context, base string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, witnessTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/tlog/witness/add-checkpoint", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	return resp.StatusCode, b, err
}
