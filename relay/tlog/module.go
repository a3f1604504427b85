// Package tlog makes the relay's log a transparency log (D19): the log in
// seq order is an RFC 6962 Merkle tree whose entry i is the 32 raw bytes
// of the id of the event with seq i+1, published as C2SP tlog-tiles under
// /tlog/ with C2SP tlog-checkpoints signed by the relay key. Hashing,
// proofs, tiles and note signatures are golang.org/x/mod/sumdb/tlog and
// golang.org/x/mod/sumdb/note.
//
// The tree lives in a file of its own beside the log (see tree), appended
// from the commit hook. The log stays the truth: at open the tree is
// checked against the last checkpoint it saved and against the log, and
// whatever the log holds past it is hashed again from the log, so a relay
// killed at any point restarts with the tree of its log.
package tlog

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
)

// Options configure the module.
type Options struct {
	// Path is the tree's hash file ("": the SQLite log's path + ".tlog").
	// When another process holds it (several processes over one
	// PostgreSQL log), Path.1, Path.2, … are tried.
	Path string
	// OnProgress, when set, hears of the tree being built from the log at
	// open (leaves done of total).
	OnProgress func(done, total int64)
	// Every is how often a new checkpoint is signed while the log grows
	// (0: 500 ms).
	Every time.Duration
	// Witnesses are asked to cosign each new checkpoint (C2SP
	// tlog-witness); the cosignatures are served with it.
	Witnesses []Witness
	// Witnessed are the note verifier keys of the logs this relay
	// witnesses at POST /tlog/witness/add-checkpoint.
	Witnessed []string
	// Observe are the base URLs of peers whose logs this relay witnesses
	// by fetching their checkpoints (the peers it mirrors).
	Observe []string
}

// Module is the transparency log capability.
type Module struct {
	opts   Options
	key    ed25519.PrivateKey
	core   *relay.Server
	log    eventlog.Log
	logger *slog.Logger
	tree   *tree
	unlock func()
	signer note.Signer
	vkey   string
	origin string
	// signMu serialises signing; latest is the newest checkpoint.
	signMu sync.Mutex
	latest atomic.Pointer[Checkpoint]
	// stalled, once set, is why the tree stopped following the log.
	stalled atomic.Pointer[string]
	// saved is the size of the checkpoint last written to disk (Run).
	saved int64
	// witness is the witness side; cosigned[i] is the size Witnesses[i]
	// last cosigned.
	witness  *witness
	wkey     string
	cosigned []atomic.Int64
	asked    int64 // the size last sent to the witnesses (Run)
	// peerOrigins maps an observed peer's URL (Options.Observe) to the
	// origin of its log, as its key names it.
	peerOrigins sync.Map
	// witnessLimit charges add-checkpoint requests by address.
	witnessLimit *relay.Limiter
}

var _ relay.Runner = (*Module)(nil)

// NewModule returns the module.
func NewModule(opts Options) *Module {
	if opts.Every <= 0 {
		opts.Every = 500 * time.Millisecond
	}
	return &Module{opts: opts, witnessLimit: relay.NewLimiter(witnessRate, time.Minute)}
}

// Name names the module.
func (m *Module) Name() string { return "tlog" }

// Mount opens the tree, brings it level with the log and registers the
// routes and the commit hook.
func (m *Module) Mount(core *relay.Server) error {
	cfg := core.Config()
	m.core, m.log, m.logger = core, core.Log(), cfg.Logger
	key := cfg.RelayKey
	if key == nil {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		key = priv
		m.logger.Warn("tlog: no relay key, checkpoints signed by a key of this run only")
	}
	m.key = key
	m.origin = OriginOf(cfg.PublicBaseURL)
	var err error
	if m.signer, m.vkey, err = signerFor(m.origin, key); err != nil {
		return fmt.Errorf("tlog key: %w", err)
	}
	path := m.opts.Path
	if path == "" {
		p, ok := m.log.(interface{ Path() string })
		if !ok {
			return errors.New("tlog: no file for the tree (Options.Path)")
		}
		path = p.Path() + ".tlog"
	}
	if err := m.open(path); err != nil {
		return err
	}
	cs := &cosigner{name: m.origin + "/witness", key: key, now: time.Now}
	m.wkey = CosignerKey(cs.name, key.Public().(ed25519.PublicKey))
	if m.witness, err = newWitness(cs, m.opts.Witnessed, m.tree.f.Name()+".witness"); err != nil {
		return err
	}
	for _, w := range m.opts.Witnesses {
		if _, err := NewCosignVerifier(w.Key); err != nil {
			return fmt.Errorf("tlog witness %s: %w", w.URL, err)
		}
	}
	m.cosigned = make([]atomic.Int64, len(m.opts.Witnesses))
	core.OnCommit(m.commit)
	if _, err := m.checkpoint(0, true); err != nil {
		return err
	}
	m.routes(core)
	core.AddMetrics(m.metrics)
	return nil
}

// open opens the tree file (or the first free alternative), checks it
// against its saved checkpoint and the log, and hashes what the log holds
// past it.
func (m *Module) open(path string) error {
	var err error
	for i := 0; i < 16; i++ {
		p := path
		if i > 0 {
			p = fmt.Sprintf("%s.%d", path, i)
		}
		if m.unlock, err = lockFile(p + ".lock"); err == nil {
			path = p
			break
		}
	}
	if err != nil {
		return fmt.Errorf("tlog: lock tree file: %w", err)
	}
	if m.tree, err = openTree(path); err != nil {
		return err
	}
	keep := m.trusted(path + ".checkpoint")
	if keep != m.tree.Size() || keep == 0 {
		if err := m.tree.truncate(keep); err != nil {
			return err
		}
	}
	return m.catchUp(context.Background(), m.opts.OnProgress)
}

// trusted returns how many leaves of the tree file to keep: the size of
// the checkpoint saved at path when the tree's root at that size matches
// it and its last leaf is still the log's, else 0 (the tree is built
// again from the log).
func (m *Module) trusted(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	_, size, root, err := ParseCheckpoint(string(b))
	if err != nil || size > m.tree.Size() {
		m.logger.Warn("tlog: saved checkpoint unusable, building the tree from the log", "err", err)
		return 0
	}
	if size == 0 {
		return 0
	}
	got, err := tlog.TreeHash(size, m.tree)
	if err != nil || got != root {
		m.logger.Warn("tlog: tree file does not match its checkpoint, building the tree from the log")
		return 0
	}
	var leaf [32]byte
	found := false
	stop := errors.New("stop")
	err = m.log.Export(context.Background(), size-1, func(int64) error { return nil }, func(seq int64, body []byte) error {
		if seq == size {
			leaf, err = idOf(body)
			found = err == nil
		}
		return stop
	})
	if !found {
		m.logger.Warn("tlog: the log no longer holds the tree's last entry, building the tree from the log", "size", size)
		return 0
	}
	hs, err := m.tree.ReadHashes([]int64{tlog.StoredHashIndex(0, size-1)})
	if err != nil || hs[0] != tlog.RecordHash(leaf[:]) {
		m.logger.Warn("tlog: the log's entry differs from the tree's, building the tree from the log", "size", size)
		return 0
	}
	return size
}

// catchUpBatch is how many leaves catchUp hashes per write.
const catchUpBatch = 4096

// catchUp appends to the tree every event the log holds past it, in seq
// order. A missing seq stalls the tree (the log was damaged or edited).
func (m *Module) catchUp(ctx context.Context, progress func(done, total int64)) error {
	var total int64
	var batch [][32]byte
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := m.tree.append(batch)
		batch = batch[:0]
		if progress != nil {
			progress(m.tree.Size(), total)
		}
		return err
	}
	err := m.log.Export(ctx, m.tree.Size(), func(through int64) error { total = through; return nil },
		func(seq int64, body []byte) error {
			if want := m.tree.Size() + int64(len(batch)) + 1; seq != want {
				return fmt.Errorf("tlog: the log has no event at seq %d (next is %d)", want, seq)
			}
			id, err := idOf(body)
			if err != nil {
				return fmt.Errorf("tlog: seq %d: %w", seq, err)
			}
			batch = append(batch, id)
			if len(batch) >= catchUpBatch {
				return flush()
			}
			return nil
		})
	if ferr := flush(); err == nil {
		err = ferr
	}
	if err != nil {
		m.stall(err)
	}
	return nil
}

// stall records why the tree stopped following the log.
func (m *Module) stall(err error) {
	msg := err.Error()
	if m.stalled.CompareAndSwap(nil, &msg) {
		m.logger.Error("tlog: the tree stopped following the log", "err", err)
	}
}

// commit is the commit hook: it appends the committed events' ids.
func (m *Module) commit(batch []eventlog.Committed) {
	if m.stalled.Load() != nil {
		return
	}
	entries := make([][32]byte, 0, len(batch))
	for _, c := range batch {
		next := m.tree.Size() + int64(len(entries)) + 1
		switch {
		case c.Seq < next:
			continue // hashed from the log already
		case c.Seq > next:
			// Another process's commits, not delivered yet: take them
			// from the log.
			if len(entries) > 0 {
				if err := m.tree.append(entries); err != nil {
					m.stall(err)
					return
				}
				entries = entries[:0]
			}
			m.catchUp(context.Background(), nil)
			if m.stalled.Load() != nil || c.Seq != m.tree.Size()+1 {
				if c.Seq > m.tree.Size()+1 {
					m.stall(fmt.Errorf("tlog: seq %d committed after %d", c.Seq, m.tree.Size()))
				}
				continue
			}
		}
		var id [32]byte
		if err := decodeID(&id, c.Event.ID); err != nil {
			m.stall(err)
			return
		}
		entries = append(entries, id)
	}
	if len(entries) > 0 {
		if err := m.tree.append(entries); err != nil {
			m.stall(err)
		}
	}
}

// checkpoint returns a checkpoint of at least min leaves: the latest one
// when it is enough and fresh (the tree has not grown, or it is under a
// second old and force is false), else a new one signed now.
func (m *Module) checkpoint(min int64, force bool) (*Checkpoint, error) {
	c := m.latest.Load()
	fresh := func(c *Checkpoint) bool {
		return c != nil && c.Size >= min && (c.Size == m.tree.Size() || (!force && time.Since(c.At) < time.Second))
	}
	if fresh(c) {
		return c, nil
	}
	m.signMu.Lock()
	defer m.signMu.Unlock()
	if c = m.latest.Load(); fresh(c) {
		return c, nil
	}
	n := m.tree.Size()
	if n < min {
		return nil, errPending
	}
	root, err := tlog.TreeHash(n, m.tree)
	if err != nil {
		return nil, err
	}
	c, err = sign(m.signer, m.origin, n, root, time.Now())
	if err != nil {
		return nil, err
	}
	m.latest.Store(c)
	return c, nil
}

var errPending = errors.New("tlog: entry not in the tree yet")

// Run signs a new checkpoint every Options.Every while the log grows, and
// saves the latest beside the tree (after the tree file's fsync) so the
// next open can trust the tree up to it.
func (m *Module) Run(ctx context.Context) {
	if len(m.opts.Observe) > 0 {
		go m.observeLoop(ctx)
	}
	t := time.NewTicker(m.opts.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.save()
			return
		case a := <-m.witness.reports:
			m.publishAlarm(ctx, m.core, a)
			continue
		case <-t.C:
		}
		if m.tree.Size() != m.latest.Load().Size {
			if _, err := m.checkpoint(0, true); err != nil {
				m.logger.Error("tlog: checkpoint", "err", err)
			}
		}
		if c := m.latest.Load(); len(m.opts.Witnesses) > 0 && c.Size != m.asked {
			m.asked = c.Size
			m.askWitnesses(ctx, c)
		}
		m.save()
	}
}

// save writes the latest checkpoint beside the tree once the tree file is
// durable up to it.
func (m *Module) save() {
	c := m.latest.Load()
	if c == nil || c.Size == m.saved {
		return
	}
	if err := m.tree.sync(); err != nil {
		m.logger.Error("tlog: sync tree", "err", err)
		return
	}
	path := m.tree.f.Name() + ".checkpoint"
	if err := writeFileAtomic(path, c.Note); err != nil {
		m.logger.Error("tlog: save checkpoint", "err", err)
		return
	}
	m.saved = c.Size
}

// writeFileAtomic replaces path with data (a temporary file renamed over
// it after an fsync).
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Size is the tree's current size (leaves).
func (m *Module) Size() int64 { return m.tree.Size() }

// Latest reports the size and base64 root of the latest signed
// checkpoint (ok false before the first).
func (m *Module) Latest() (size int64, root string, ok bool) {
	c := m.latest.Load()
	if c == nil {
		return 0, "", false
	}
	return c.Size, base64.StdEncoding.EncodeToString(c.Root[:]), true
}

// Alarms reports how many alarms (SPEC §21.5, at most the first 64 kept
// as evidence) this witness holds against the log of the relay at url:
// a peer it observes, by the origin its key names, or any relay by the
// origin of its public URL.
func (m *Module) Alarms(url string) int {
	if m.witness == nil {
		return 0
	}
	url = strings.TrimRight(url, "/")
	origins := []string{OriginOf(url)}
	if o, ok := m.peerOrigins.Load(url); ok {
		origins = append(origins, o.(string))
	}
	w := m.witness
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, a := range w.state.Alarms {
		if slices.Contains(origins, a.Origin) {
			n++
		}
	}
	return n
}

// VerifierKey is the note verifier key of the checkpoints.
func (m *Module) VerifierKey() string { return m.vkey }

// Close saves the latest checkpoint and releases the tree file.
func (m *Module) Close() error {
	if m.tree == nil {
		return nil
	}
	m.save()
	err := m.tree.Close()
	m.unlock()
	return err
}

// SetWitnessing sets Options.Witnesses, Witnessed and Observe (before the
// relay is built).
func (m *Module) SetWitnessing(witnesses []Witness, witnessed, observe []string) {
	m.opts.Witnesses, m.opts.Witnessed, m.opts.Observe = witnesses, witnessed, observe
}

// WitnessKey is the cosigner key of this relay's witness.
func (m *Module) WitnessKey() string { return m.wkey }

// SetProgress sets Options.OnProgress (before the relay is built).
func (m *Module) SetProgress(fn func(done, total int64)) { m.opts.OnProgress = fn }
