package sqlite

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
)

// The items file, <db>.items, lists every stored event's (seq,
// created_at, id) in seq order, so that a start reads it (sequentially,
// 52 bytes an event) rather than the whole events table to fill the
// relay's reconciliation index (Items with no filter), a read of about
// 1.3 s per million events (SPEC §2 "Items file").
//
// Layout: the 12-byte header "anp2itm\n" and version (uint32), then one
// 52-byte record per event: seq (uint64), created_at (int64), id (32
// bytes), and the CRC-32C of those 48 bytes (uint32), all little-endian.
// The writer appends the records of a transaction's events after it
// commits, with one write and no fsync: a crash may leave the file short
// of the log or end it in a torn record. Open keeps the whole records
// that belong to the log (see openItems) and appends the log's rows after
// them; a reader checks every record's CRC and falls back to the table
// at the first bad one.
const (
	itemsMagic   = "anp2itm\n"
	itemsVersion = 1
	itemsHeader  = 12
	itemRecord   = 52
)

// ItemsPath is the items file of the log at path.
func ItemsPath(path string) string { return path + ".items" }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// itemsFile is the writer's handle on the items file.
type itemsFile struct {
	f *os.File
	// n is the number of whole records the file holds (readers read no
	// further); broken is set once a write failed (readers use the table
	// until the next Open).
	n      atomic.Int64
	broken atomic.Bool
	buf    []byte
}

// appendItem adds the record of one event to b.
func appendItem(b []byte, seq, at int64, id []byte) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint64(b, uint64(seq))
	b = binary.LittleEndian.AppendUint64(b, uint64(at))
	b = append(b, id[:32]...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// parseItem reads one record; ok is false when its CRC does not match.
func parseItem(b []byte) (seq, at int64, id []byte, ok bool) {
	if len(b) < itemRecord || crc32.Checksum(b[:48], castagnoli) != binary.LittleEndian.Uint32(b[48:]) {
		return 0, 0, nil, false
	}
	return int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:])), b[16:48], true
}

// write appends the records of events (writer only). A failed write
// breaks the file until the next Open.
func (x *itemsFile) write(events []newItem) {
	if x == nil || len(events) == 0 || x.broken.Load() {
		return
	}
	x.buf = x.buf[:0]
	for _, e := range events {
		x.buf = appendItem(x.buf, e.seq, e.at, e.id[:])
	}
	if _, err := x.f.Write(x.buf); err != nil {
		x.broken.Store(true)
		slog.Warn("items file not written: reconciliation reads the log until the next start", "err", err)
		return
	}
	x.n.Add(int64(len(events)))
}

// newItem is an event the writer adds to the items file.
type newItem struct {
	seq, at int64
	id      [32]byte
}

// openItems opens the items file of the log w writes and makes it list
// every row of the log: it keeps the whole records that belong to the log
// (the last one and a sample of 256 match the rows at their seqs; the
// records ascend by seq), drops the rest, and appends the log's rows after
// the last record kept. It returns why records were dropped ("" when none
// were).
func openItems(w *sql.DB, path string) (*itemsFile, string, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("items file: %w", err)
	}
	x := &itemsFile{f: f}
	keep, last, why, err := x.check(w)
	if err == nil {
		err = f.Truncate(itemsHeader + keep*itemRecord)
	}
	if err == nil && keep == 0 {
		_, err = f.WriteAt(binary.LittleEndian.AppendUint32([]byte(itemsMagic), itemsVersion), 0)
	}
	if err == nil {
		_, err = f.Seek(itemsHeader+keep*itemRecord, io.SeekStart)
	}
	if err == nil {
		x.n.Store(keep)
		err = x.catchUp(w, last)
	}
	if err != nil {
		f.Close()
		return nil, "", fmt.Errorf("items file: %w", err)
	}
	return x, why, nil
}

// check returns how many of the file's records to keep and the seq of the
// last kept, and why it keeps fewer than the file holds.
func (x *itemsFile) check(w *sql.DB) (keep, last int64, why string, err error) {
	fi, err := x.f.Stat()
	if err != nil {
		return 0, 0, "", err
	}
	if fi.Size() == 0 {
		return 0, 0, noItemsFile, nil
	}
	head := make([]byte, itemsHeader)
	if _, err := x.f.ReadAt(head, 0); err != nil || string(head[:8]) != itemsMagic || binary.LittleEndian.Uint32(head[8:]) != itemsVersion {
		return 0, 0, "not an items file of this version", nil
	}
	n := (fi.Size() - itemsHeader) / itemRecord
	if n*itemRecord+itemsHeader != fi.Size() {
		why = "a torn record at its end"
	}
	rec := make([]byte, itemRecord)
	record := func(i int64) (seq, at int64, id []byte, ok bool) {
		if _, err := x.f.ReadAt(rec, itemsHeader+i*itemRecord); err != nil {
			return 0, 0, nil, false
		}
		return parseItem(rec)
	}
	matches := func(seq, at int64, id []byte) bool {
		var rowAt int64
		var rowID []byte
		err := w.QueryRow(`SELECT created_at, id FROM events WHERE seq = ?`, seq).Scan(&rowAt, &rowID)
		return err == nil && rowAt == at && bytes.Equal(rowID, id)
	}
	var end int64
	if err := w.QueryRow(`SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&end); err != nil {
		return 0, 0, "", err
	}
	// A crash tears the end (or, after a commit without fsync, the log's
	// end may be rolled back): drop the records past the log's end or
	// damaged from the end back, then the last kept must be the log's.
	for n > 0 {
		if seq, at, id, ok := record(n - 1); ok && seq <= end {
			if !matches(seq, at, id) {
				return 0, 0, fmt.Sprintf("its record at seq %d is not the log's", seq), nil
			}
			last = seq
			break
		}
		n--
		why = "its last records are damaged or past the log's end"
	}
	var prev int64
	for i := int64(0); i < n; i += max(1, n/256) {
		seq, at, id, ok := record(i)
		if !ok || seq <= prev || seq > last || !matches(seq, at, id) {
			return 0, 0, fmt.Sprintf("its record %d is not the log's", i), nil
		}
		prev = seq
	}
	return n, last, why, nil
}

// catchUp appends the records of the log's rows after seq after.
func (x *itemsFile) catchUp(w *sql.DB, after int64) error {
	rows, err := w.Query(`SELECT seq, created_at, id FROM events WHERE seq > ? ORDER BY seq`, after)
	if err != nil {
		return err
	}
	defer rows.Close()
	var batch []newItem
	for rows.Next() {
		var e newItem
		var id sql.RawBytes
		if err := rows.Scan(&e.seq, &e.at, &id); err != nil {
			return err
		}
		copy(e.id[:], id)
		if batch = append(batch, e); len(batch) == 4096 {
			x.write(batch)
			batch = batch[:0]
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	x.write(batch)
	if x.broken.Load() {
		return errors.New("write failed")
	}
	return nil
}

// noItemsFile is why a new items file was started.
const noItemsFile = "no items file"

// each calls fn with the created_at and id of every record, reading the
// file with a handle of its own, a chunk at a time: every record of a
// chunk is checked before fn sees any. It returns whether it read every
// record, and the seq of the last one it gave fn (the caller reads the
// log after it when it did not).
func (x *itemsFile) each(path string, fn func(createdAt int64, id []byte)) (all bool, last int64) {
	if x == nil || x.broken.Load() {
		return false, 0
	}
	n := x.n.Load()
	f, err := os.Open(path)
	if err != nil {
		return false, 0
	}
	defer f.Close()
	r := io.NewSectionReader(f, itemsHeader, n*itemRecord)
	chunk := make([]byte, 4096*itemRecord)
	for n > 0 {
		b := chunk[:min(n, 4096)*itemRecord]
		if _, err := io.ReadFull(r, b); err != nil {
			return false, last
		}
		for i := 0; i < len(b); i += itemRecord {
			if _, _, _, ok := parseItem(b[i:]); !ok {
				return false, last
			}
		}
		for i := 0; i < len(b); i += itemRecord {
			seq, at, id, _ := parseItem(b[i:])
			fn(at, id)
			last = seq
		}
		n -= int64(len(b) / itemRecord)
	}
	return true, last
}

// openItems opens the items file at Open (see openItems), logging why
// records were dropped or the file started anew. A file that cannot be
// opened or written leaves the store without one: Items then reads the
// log.
func (s *Store) openItems(w *sql.DB) {
	x, why, err := openItems(w, ItemsPath(s.path))
	if err != nil {
		slog.Warn("no items file: reconciliation reads the log", "path", ItemsPath(s.path), "err", err)
		return
	}
	s.items = x
	switch why {
	case "":
	case noItemsFile:
		if x.n.Load() > 0 {
			slog.Info("items file started from the log", "path", ItemsPath(s.path), "events", x.n.Load())
		}
	default:
		slog.Warn("items file not the log's in full: the rest read from the log", "path", ItemsPath(s.path), "why", why, "events", x.n.Load())
	}
}
