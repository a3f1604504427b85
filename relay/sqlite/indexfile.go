package sqlite

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/anp2net/relay/relay/eventlog"
)

// The index file, <db>.idx, holds the id and author indexes as they were
// at one position of the log, so Open reads only the log after that
// position instead of the whole events table (SPEC §2 "Index file").
//
// Layout, integers little-endian:
//
//	magic    [8]byte "anp2idx\n"
//	version  uint32  (indexVersion)
//	seq      uint64  the highest seq the indexes hold (0: none)
//	id       [32]byte the id stored at seq (zero when seq is 0)
//	withheld uint64  the log's withheld events (revokes rows of author x'')
//	runs     uint32, then per run: n uint64, n keys uint64, n seqs uint32
//	authors  uint64, then per author: agent [32]byte, n uint32 (>0),
//	         n entries (created_at int64, seq uint32, kind uint32, the
//	         id's first 4 bytes, big-endian, as uint32)
//	wide     uint32, then per entry: seq uint32, kind int64
//	sum      [32]byte SHA-256 of everything before it
//
// Every run is sorted by (key, seq), every author's entries by
// (created_at, seq), every seq is in 1..seq, and an entry's kind is
// wideKind exactly when wide names its seq. A file that breaks any of
// this, or whose sum, magic or version differ, is not used.
const (
	indexMagic   = "anp2idx\n"
	indexVersion = 1
)

// IndexPath is the index file of the log at path.
func IndexPath(path string) string { return path + ".idx" }

// indexSnap is the indexes at one log position: what the file holds.
// Runs and chunks are shared with the live indexes, which never change
// them (see idIndex, authorIndex).
type indexSnap struct {
	seq      int64
	id       [32]byte
	withheld int64
	runs     []idRun
	authors  []authorSnap
	wide     map[uint32]int64
}

// authorSnap is one author's entries, in order, in chunks.
type authorSnap struct {
	agent  [32]byte
	chunks [][]authorEntry
}

// snapshot returns the indexes as they are (writer only, between
// transactions: the ids' tail is copied, the rest is shared).
func (s *Store) snapshot() *indexSnap {
	snap := &indexSnap{seq: s.nextSeq - 1}
	x := s.ids
	x.mu.RLock()
	snap.runs = slices.Clone(x.runs)
	x.mu.RUnlock()
	if x.tailN > 0 {
		snap.runs = append(snap.runs, x.tailRun())
	}
	a := s.authors
	a.mu.RLock()
	snap.authors = make([]authorSnap, 0, len(a.m))
	for agent, l := range a.m {
		snap.authors = append(snap.authors, authorSnap{agent: agent, chunks: slices.Clone(l.chunks)})
	}
	snap.wide = make(map[uint32]int64, len(a.wide))
	for k, v := range a.wide {
		snap.wide[k] = v
	}
	a.mu.RUnlock()
	slices.SortFunc(snap.authors, func(a, b authorSnap) int { return bytes.Compare(a.agent[:], b.agent[:]) })
	return snap
}

// hashWriter hashes and writes what it gathers, 64 KiB at a time.
type hashWriter struct {
	w   io.Writer
	h   hash.Hash
	buf []byte
	err error
}

func (w *hashWriter) write(b []byte) {
	if w.buf = append(w.buf, b...); len(w.buf) >= 64<<10 {
		w.flush()
	}
}
func (w *hashWriter) u32(v uint32) {
	if w.buf = binary.LittleEndian.AppendUint32(w.buf, v); len(w.buf) >= 64<<10 {
		w.flush()
	}
}
func (w *hashWriter) u64(v uint64) {
	if w.buf = binary.LittleEndian.AppendUint64(w.buf, v); len(w.buf) >= 64<<10 {
		w.flush()
	}
}
func (w *hashWriter) flush() {
	w.h.Write(w.buf)
	if _, err := w.w.Write(w.buf); err != nil && w.err == nil {
		w.err = err
	}
	w.buf = w.buf[:0]
}

// encode writes snap in the file's layout.
func (snap *indexSnap) encode(out io.Writer) error {
	w := &hashWriter{w: out, h: sha256.New(), buf: make([]byte, 0, 72<<10)}
	w.write([]byte(indexMagic))
	w.u32(indexVersion)
	w.u64(uint64(snap.seq))
	w.write(snap.id[:])
	w.u64(uint64(snap.withheld))
	w.u32(uint32(len(snap.runs)))
	for _, r := range snap.runs {
		w.u64(uint64(len(r.keys)))
		for _, k := range r.keys {
			w.u64(k)
		}
		for _, s := range r.seqs {
			w.u32(s)
		}
	}
	w.u64(uint64(len(snap.authors)))
	for _, a := range snap.authors {
		n := 0
		for _, c := range a.chunks {
			n += len(c)
		}
		w.write(a.agent[:])
		w.u32(uint32(n))
		for _, c := range a.chunks {
			for _, e := range c {
				w.u64(uint64(e.at()))
				w.u32(e.seq)
				w.u32(e.kind)
				w.u32(e.id)
			}
		}
	}
	w.u32(uint32(len(snap.wide)))
	seqs := make([]uint32, 0, len(snap.wide))
	for s := range snap.wide {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	for _, s := range seqs {
		w.u32(s)
		w.u64(uint64(snap.wide[s]))
	}
	w.flush()
	if _, err := out.Write(w.h.Sum(nil)); err != nil && w.err == nil {
		w.err = err
	}
	return w.err
}

// errIndexFile is what decodeIndex returns for a file it will not use.
var errIndexFile = errors.New("index file damaged")

// hashReader reads, hashing what it reads, and counts what remains of a
// file of known size so no count in it can ask for more than the file
// holds.
type hashReader struct {
	r    *bufio.Reader
	h    hash.Hash
	left int64
	err  error
	buf  []byte
}

// read returns the next n bytes (valid until the next read); after an
// error, n bytes of garbage.
func (r *hashReader) read(n int) []byte {
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	b := r.buf[:n]
	if r.err != nil {
		return b
	}
	if int64(n) > r.left {
		r.err = fmt.Errorf("%w: truncated", errIndexFile)
		return b
	}
	if _, err := io.ReadFull(r.r, b); err != nil {
		r.err = fmt.Errorf("%w: %v", errIndexFile, err)
		return b
	}
	r.left -= int64(n)
	r.h.Write(b)
	return b
}

// each reads n items of size bytes and calls put with each, reading many
// at once.
func (r *hashReader) each(n, size int, put func(b []byte)) {
	for n > 0 && r.err == nil {
		k := min(n, (64<<10)/size)
		b := r.read(k * size)
		if r.err != nil {
			return
		}
		for i := range k {
			put(b[i*size : i*size+size])
		}
		n -= k
	}
}
func (r *hashReader) u32() uint32 { return binary.LittleEndian.Uint32(r.read(4)) }
func (r *hashReader) u64() uint64 { return binary.LittleEndian.Uint64(r.read(8)) }

// count reads a count of items of size bytes each and checks that the
// rest of the file can hold them.
func (r *hashReader) count(n uint64, size int64) int {
	if r.err == nil && n > uint64(r.left/size) {
		r.err = fmt.Errorf("%w: a count of %d past the file's end", errIndexFile, n)
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

// decodeIndex reads an index file of size bytes. It returns an error
// matching errIndexFile for any file that is not one this version wrote
// whole (see the layout above).
func decodeIndex(in io.Reader, size int64) (*indexSnap, error) {
	r := &hashReader{r: bufio.NewReaderSize(in, 1<<20), h: sha256.New(), left: size - sha256.Size}
	if r.left < 0 || string(r.read(len(indexMagic))) != indexMagic {
		return nil, fmt.Errorf("%w: not an index file", errIndexFile)
	}
	if v := r.u32(); v != indexVersion && r.err == nil {
		return nil, fmt.Errorf("%w: version %d, want %d", errIndexFile, v, indexVersion)
	}
	snap := &indexSnap{seq: int64(r.u64())}
	copy(snap.id[:], r.read(32))
	snap.withheld = int64(r.u64())
	if r.err == nil && (snap.seq < 0 || snap.seq > maxSeq || snap.withheld < 0) {
		return nil, fmt.Errorf("%w: position %d", errIndexFile, snap.seq)
	}
	if err := snap.decodeRuns(r); err != nil {
		return nil, err
	}
	if err := snap.decodeAuthors(r); err != nil {
		return nil, err
	}
	sum := r.h.Sum(nil)
	r.left += sha256.Size
	if got := r.read(sha256.Size); r.err == nil && !bytes.Equal(got, sum) {
		return nil, fmt.Errorf("%w: checksum mismatch", errIndexFile)
	}
	if r.err == nil && r.left != 0 {
		return nil, fmt.Errorf("%w: %d bytes past its end", errIndexFile, r.left)
	}
	return snap, r.err
}

func (snap *indexSnap) decodeRuns(r *hashReader) error {
	runs := r.count(uint64(r.u32()), 8)
	for range runs {
		n := r.count(r.u64(), 12)
		run := idRun{keys: make([]uint64, 0, n), seqs: make([]uint32, 0, n)}
		r.each(n, 8, func(b []byte) { run.keys = append(run.keys, binary.LittleEndian.Uint64(b)) })
		r.each(n, 4, func(b []byte) { run.seqs = append(run.seqs, binary.LittleEndian.Uint32(b)) })
		if r.err != nil {
			return r.err
		}
		for i, seq := range run.seqs {
			if seq == 0 || int64(seq) > snap.seq {
				return fmt.Errorf("%w: seq %d past %d", errIndexFile, seq, snap.seq)
			}
			if i > 0 && cmp.Or(cmp.Compare(run.keys[i-1], run.keys[i]), cmp.Compare(run.seqs[i-1], seq)) >= 0 {
				return fmt.Errorf("%w: run out of order", errIndexFile)
			}
		}
		snap.runs = append(snap.runs, makeRun(run.keys, run.seqs))
	}
	return r.err
}

func (snap *indexSnap) decodeAuthors(r *hashReader) error {
	n := r.count(r.u64(), 36)
	seen := make(map[[32]byte]bool, n)
	wideSeqs := map[uint32]bool{}
	for range n {
		var a authorSnap
		copy(a.agent[:], r.read(32))
		m := r.count(uint64(r.u32()), 20)
		if r.err == nil && (m == 0 || seen[a.agent]) {
			return fmt.Errorf("%w: author listed twice or empty", errIndexFile)
		}
		seen[a.agent] = true
		entries := make([]authorEntry, 0, m)
		r.each(m, 20, func(b []byte) {
			entries = append(entries, authorEntry{atHi: binary.LittleEndian.Uint32(b[4:]), atLo: binary.LittleEndian.Uint32(b),
				seq: binary.LittleEndian.Uint32(b[8:]), kind: binary.LittleEndian.Uint32(b[12:]), id: binary.LittleEndian.Uint32(b[16:])})
		})
		if r.err != nil {
			return r.err
		}
		for i, e := range entries {
			if e.seq == 0 || int64(e.seq) > snap.seq || i > 0 && compareEntries(entries[i-1], e) >= 0 {
				return fmt.Errorf("%w: author entries out of order", errIndexFile)
			}
			if e.kind == wideKind {
				wideSeqs[e.seq] = true
			}
		}
		a.chunks = [][]authorEntry{entries}
		snap.authors = append(snap.authors, a)
	}
	w := r.count(uint64(r.u32()), 12)
	snap.wide = make(map[uint32]int64, w)
	for range w {
		seq, kind := r.u32(), int64(r.u64())
		if r.err == nil && (!wideSeqs[seq] || kind < wideKind) {
			return fmt.Errorf("%w: wide kind %d at seq %d", errIndexFile, kind, seq)
		}
		snap.wide[seq] = kind
	}
	if r.err == nil && len(snap.wide) != len(wideSeqs) {
		return fmt.Errorf("%w: wide kinds missing", errIndexFile)
	}
	return r.err
}

// install makes live indexes of snap.
func (snap *indexSnap) install() (*idIndex, *authorIndex) {
	x := newIDIndex()
	x.runs = snap.runs
	slices.SortStableFunc(x.runs, func(a, b idRun) int { return cmp.Compare(len(b.keys), len(a.keys)) })
	for i := mergeDue(x.runs); i >= 0; i = mergeDue(x.runs) {
		x.runs = slices.Concat(x.runs[:i], []idRun{mergeRuns(x.runs[i], x.runs[i+1])}, x.runs[i+2:])
	}
	a := newAuthorIndex()
	a.wide = snap.wide
	for _, as := range snap.authors {
		l := &authorList{}
		for _, c := range as.chunks {
			for len(c) > 0 {
				k := min(len(c), authorChunk)
				l.chunks = append(l.chunks, c[:k:k])
				c = c[k:]
				a.n += k
			}
		}
		a.m[as.agent] = l
	}
	return x, a
}

// saveIndex writes snap to the index file: to a temporary file, synced,
// renamed over the file, and the directory synced, so a crash at any point
// leaves the previous file or this one. It first reads the id at snap's
// seq from the log.
func (s *Store) saveIndex(snap *indexSnap, db *sql.DB) error {
	if snap.seq > 0 {
		var id []byte
		if err := db.QueryRow(`SELECT id FROM events WHERE seq = ?`, snap.seq).Scan(&id); err != nil {
			return fmt.Errorf("save index: id at seq %d: %w", snap.seq, err)
		}
		copy(snap.id[:], id)
	}
	path := IndexPath(s.path)
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("save index: %w", err)
	}
	defer os.Remove(f.Name()) // gone once renamed
	err = snap.encode(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		return fmt.Errorf("save index: %w", err)
	}
	s.savedSeq.Store(snap.seq)
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// removeIndex deletes the index file (before a change the file would not
// follow, such as a redaction), durably.
func (s *Store) removeIndex() error {
	path := IndexPath(s.path)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove index file: %w", err)
	}
	s.savedSeq.Store(-1)
	return syncDir(filepath.Dir(path))
}

// indexSaveMin is the fewest events committed between two saves of the
// index file while the log grows; a save also waits for the log to grow
// by a sixteenth since the last (see Store.committed).
const indexSaveMin = 1 << 16

// openIndexes fills the id and author indexes at Open (on the writer
// connection): from the index file when it belongs to this log, then from
// the events after its position; otherwise from the whole log, logging
// why.
func (s *Store) openIndexes(w *sql.DB) error {
	s.savedSeq.Store(-1)
	// What a save cut short left (the writer lock keeps any other out).
	if tmps, err := filepath.Glob(globQuote(IndexPath(s.path)) + ".tmp-*"); err == nil {
		for _, t := range tmps {
			os.Remove(t)
		}
	}
	snap, why, err := readIndexFile(w, IndexPath(s.path))
	if err != nil {
		return err
	}
	from := int64(0)
	if snap != nil {
		s.ids, s.authors = snap.install()
		from = snap.seq
		s.savedSeq.Store(snap.seq)
	} else {
		s.ids, s.authors = newIDIndex(), newAuthorIndex()
	}
	n, err := loadIndexes(w, s.ids, s.authors, from)
	if err != nil {
		return err
	}
	s.indexLoad = IndexLoad{From: from, Rows: n, Why: why}
	switch {
	case why == "" || n == 0:
	case snap == nil && why == noIndexFile:
		slog.Info("log index file not used: reading the whole log", "path", IndexPath(s.path), "why", why, "events", n)
	default:
		slog.Warn("log index file not used: reading the whole log", "path", IndexPath(s.path), "why", why, "events", n)
	}
	return nil
}

// noIndexFile is IndexLoad.Why when there is no index file.
const noIndexFile = "no index file"

// IndexLoad says how Open filled the log's in-memory indexes.
type IndexLoad struct {
	From int64  // the index file's position (0: the file was not used)
	Rows int64  // events read from the log, after From
	Why  string // why the file was not used ("" when it was)
}

// IndexLoad returns how Open filled the log's in-memory indexes.
func (s *Store) IndexLoad() IndexLoad { return s.indexLoad }

// readIndexFile returns the index file at path when it belongs to the log
// w writes, or nil and why not. Its error is the log's, not the file's.
func readIndexFile(w *sql.DB, path string) (*indexSnap, string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, noIndexFile, nil
	}
	if err != nil {
		return nil, err.Error(), nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err.Error(), nil
	}
	snap, err := decodeIndex(f, fi.Size())
	if err != nil {
		return nil, err.Error(), nil
	}
	why, err := snap.check(w)
	if why != "" || err != nil {
		return nil, why, err
	}
	return snap, "", nil
}

// indexSamples is about how many of its ids, and of its author entries,
// an index file's check compares with the log: all of them in a file of
// up to that many events.
const indexSamples = 256

// check reports why snap does not belong to the log w writes ("" when it
// does): the event at its seq must be the one it names, the log must
// withhold as many events as when it was saved (a redaction changes the
// author index in place), and a sample of its entries (about
// indexSamples ids and as many author entries, evenly spread) must match
// the rows at their seqs.
func (snap *indexSnap) check(w *sql.DB) (string, error) {
	var withheld int64
	if err := w.QueryRow(`SELECT COUNT(*) FROM revokes WHERE author = x''`).Scan(&withheld); err != nil {
		return "", fmt.Errorf("load ids: %w", err)
	}
	if withheld != snap.withheld {
		return fmt.Sprintf("saved with %d withheld events, the log has %d", snap.withheld, withheld), nil
	}
	row, err := w.Prepare(`SELECT id, agent_id, created_at, kind FROM events WHERE seq = ?`)
	if err != nil {
		return "", fmt.Errorf("load ids: %w", err)
	}
	defer row.Close()
	var id, agent []byte
	var at, kind int64
	read := func(seq int64) (bool, error) {
		err := row.QueryRow(seq).Scan(&id, &agent, &at, &kind)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	}
	if snap.seq > 0 {
		if ok, err := read(snap.seq); err != nil || !ok {
			return fmt.Sprintf("saved at seq %d, which the log does not hold", snap.seq), err
		}
		if !bytes.Equal(id, snap.id[:]) {
			return fmt.Sprintf("saved at seq %d, where the log holds another event", snap.seq), nil
		}
	}
	total := 0
	for _, r := range snap.runs {
		total += len(r.keys)
	}
	step := max(1, total/indexSamples)
	for _, r := range snap.runs {
		for i := 0; i < len(r.keys); i += step {
			if ok, err := read(int64(r.seqs[i])); err != nil || !ok || len(id) != 32 || idKey(id) != r.keys[i] {
				return fmt.Sprintf("its id at seq %d is not the log's", r.seqs[i]), err
			}
		}
	}
	for k, a := range snap.authors {
		for _, c := range a.chunks {
			for i := (k * 7) % step; i < len(c); i += step {
				e := c[i]
				ok, err := read(int64(e.seq))
				if err != nil || !ok || !bytes.Equal(agent, a.agent[:]) || len(id) != 32 || entryOf(at, kind, int64(e.seq), idPrefix(id)) != e {
					return fmt.Sprintf("its author entry at seq %d is not the log's", e.seq), err
				}
			}
		}
	}
	return "", nil
}

// committed runs after each commit on the writer: once the log has grown
// enough since the index file was saved, it snapshots the indexes and
// saves them on a goroutine of its own (one at a time). Not in a bulk
// load, nor after a commit without fsync: a crash of the machine could
// roll back events the file would name.
func (s *Store) committed(n int) {
	s.sinceSave += int64(n)
	if s.bulk > 0 || s.relaxed || s.sinceSave < max(s.saveMin.Load(), s.nextSeq/16) || !s.saving.CompareAndSwap(false, true) {
		return
	}
	snap, err := s.snapshotWithheld()
	if err != nil {
		s.saving.Store(false)
		slog.Warn("log index file not saved", "err", err)
		return
	}
	s.sinceSave = 0
	s.saveWG.Add(1)
	go func() {
		defer s.saveWG.Done()
		defer s.saving.Store(false)
		if err := s.saveIndex(snap, s.read); err != nil {
			slog.Warn("log index file not saved", "err", err)
		}
	}()
}

// snapshotWithheld is snapshot with the log's count of withheld events
// (writer only).
func (s *Store) snapshotWithheld() (*indexSnap, error) {
	snap := s.snapshot()
	if err := s.write.QueryRow(`SELECT COUNT(*) FROM revokes WHERE author = x''`).Scan(&snap.withheld); err != nil {
		return nil, fmt.Errorf("count withheld: %w", err)
	}
	return snap, nil
}

// saveAtClose saves the index file once the writer has stopped, unless it
// holds the indexes as they are.
func (s *Store) saveAtClose() {
	s.saveWG.Wait()
	if s.ids != nil {
		s.ids.wait()
	}
	if s.ids == nil || s.relaxed || s.savedSeq.Load() == s.nextSeq-1 {
		return
	}
	snap, err := s.snapshotWithheld()
	if err == nil {
		err = s.saveIndex(snap, s.write)
	}
	if err != nil {
		slog.Warn("log index file not saved", "err", err)
	}
}

var _ eventlog.IndexSizer = (*Store)(nil)

// IndexReport reports the id and author indexes' entries and estimated
// heap, the index file's size, and how Open filled them.
func (s *Store) IndexReport() eventlog.IndexReport {
	file := int64(-1)
	if fi, err := os.Stat(IndexPath(s.path)); err == nil {
		file = fi.Size()
	}
	return eventlog.IndexReport{
		Indexes: []eventlog.IndexSize{
			{Name: "ids", Entries: int64(s.ids.len()), Bytes: s.ids.bytes()},
			{Name: "authors", Entries: int64(s.authors.len()), Bytes: s.authors.bytes()},
		},
		FileBytes: file, LoadedFrom: s.indexLoad.From, RowsRead: s.indexLoad.Rows,
	}
}

// globQuote escapes the characters filepath.Match treats as patterns.
func globQuote(p string) string {
	var b []byte
	for i := 0; i < len(p); i++ {
		if c := p[i]; c == '*' || c == '?' || c == '[' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, p[i])
	}
	return string(b)
}
