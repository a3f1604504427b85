package state

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// manifestFormat names the layout of a snapshot directory.
const manifestFormat = "anp2-state/1"

// Manifest describes one saved snapshot: the log position it reached and,
// per view, its version, size and SHA-256.
type Manifest struct {
	Format  string         `json:"format"`
	Seq     int64          `json:"seq"`
	Count   int64          `json:"count"`
	LastID  string         `json:"last_id"`
	SavedAt int64          `json:"saved_at"`
	Views   []ManifestView `json:"views"`
	Unsaved []string       `json:"unsaved,omitempty"`
}

// ManifestView is one view's entry in a Manifest.
type ManifestView struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Bytes   int64  `json:"bytes"`
	SHA256  string `json:"sha256"`
}

// Dir keeps saved state in a directory beside the log: one subdirectory
// snap-<seq> per snapshot holding a MANIFEST and a file per view. A
// snapshot is written under a temporary name, synced, and renamed into
// place, so a crash while saving leaves the previous snapshot whole.
type Dir struct {
	path string

	// mu serializes saves and guards last and loaded.
	mu sync.Mutex
	// last is the manifest this process saved last; loaded the one read
	// at start.
	last, loaded *Manifest
	// resumed is the log position the relay resumed from (-1: folded the
	// whole log).
	resumed int64
}

// OpenDir returns the state directory at path, creating it.
func OpenDir(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	return &Dir{path: path, resumed: -1}, nil
}

// Saved reports whether this process already saved a snapshot at seq.
func (d *Dir) Saved(seq int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last != nil && d.last.Seq == seq
}

// SetResumed records the log position the relay resumed from (-1: it
// folded the whole log); current reports that the snapshot read at start
// holds every view that has a saved form, valid, so that saving again at
// that position would write the same snapshot.
func (d *Dir) SetResumed(seq int64, current bool) {
	d.mu.Lock()
	d.resumed = seq
	if current && d.loaded != nil && d.loaded.Seq == seq {
		d.last = d.loaded
	}
	d.mu.Unlock()
}

// Resumed returns what SetResumed recorded.
func (d *Dir) Resumed() int64 { d.mu.Lock(); defer d.mu.Unlock(); return d.resumed }

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

var validName = func(n string) bool {
	if n == "" || len(n) > 64 {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') || n[0] == '.' {
			return false
		}
	}
	return true
}

// Save writes c as the newest snapshot and removes older ones and any
// left by an interrupted save. It returns the manifest written, or the
// one saved already when c is not newer.
func (d *Dir) Save(c *Capture) (*Manifest, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last != nil && (d.last.Seq == c.Seq && c.Seq > 0 || d.last.Seq > c.Seq) {
		// Nothing new since, or a capture older than the saved one (two
		// saves' encodings overlapped): keep the newer.
		return d.last, nil
	}
	m := &Manifest{Format: manifestFormat, Seq: c.Seq, Count: c.Count, LastID: c.LastID, SavedAt: time.Now().Unix(), Unsaved: c.Unsaved}
	tmp, err := os.MkdirTemp(d.path, "tmp-")
	if err != nil {
		return nil, fmt.Errorf("save state: %w", err)
	}
	defer os.RemoveAll(tmp) // nothing left once renamed
	for _, v := range c.Views {
		if !validName(v.Name) {
			return nil, fmt.Errorf("save state: view name %q", v.Name)
		}
		sum := sha256.Sum256(v.Data)
		if err := writeSynced(filepath.Join(tmp, v.Name+".snap"), v.Data); err != nil {
			return nil, err
		}
		m.Views = append(m.Views, ManifestView{v.Name, v.Version, int64(len(v.Data)), hex.EncodeToString(sum[:])})
	}
	mb, _ := json.MarshalIndent(m, "", " ")
	if err := writeSynced(filepath.Join(tmp, "MANIFEST"), mb); err != nil {
		return nil, err
	}
	if err := syncDir(tmp); err != nil {
		return nil, err
	}
	final := filepath.Join(d.path, fmt.Sprintf("snap-%020d", c.Seq))
	os.RemoveAll(final) // a snapshot of the same seq from an earlier run
	if err := os.Rename(tmp, final); err != nil {
		return nil, fmt.Errorf("save state: %w", err)
	}
	if err := syncDir(d.path); err != nil {
		return nil, err
	}
	d.last = m
	d.prune(final)
	return m, nil
}

// prune removes every snapshot and temporary directory but keep.
func (d *Dir) prune(keep string) {
	ents, _ := os.ReadDir(d.path)
	for _, e := range ents {
		p := filepath.Join(d.path, e.Name())
		if p != keep && (strings.HasPrefix(e.Name(), "snap-") || strings.HasPrefix(e.Name(), "tmp-")) {
			os.RemoveAll(p)
		}
	}
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

func syncDir(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("save state: sync %s: %w", path, err)
	}
	return nil
}

// Saved is the newest snapshot read back: its manifest and each view's
// data that matched its checksum. Bad names the views whose data is
// missing or damaged, with why.
type Saved struct {
	Manifest *Manifest
	Data     map[string][]byte
	Versions map[string]string
	Bad      map[string]string
}

// ErrNoSnapshot reports that the directory holds no snapshot.
var ErrNoSnapshot = errors.New("no saved state")

// Latest reads the newest snapshot. It returns ErrNoSnapshot when there is
// none, an error when its manifest is unreadable; damaged view files are
// reported in Saved.Bad, never returned as data.
func (d *Dir) Latest() (*Saved, error) {
	ents, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	var seqs []int64
	for _, e := range ents {
		if s, ok := strings.CutPrefix(e.Name(), "snap-"); ok && e.IsDir() {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
				seqs = append(seqs, n)
			}
		}
	}
	if len(seqs) == 0 {
		return nil, ErrNoSnapshot
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] > seqs[j] })
	dir := filepath.Join(d.path, fmt.Sprintf("snap-%020d", seqs[0]))
	mb, err := os.ReadFile(filepath.Join(dir, "MANIFEST"))
	if err != nil {
		return nil, fmt.Errorf("state manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return nil, fmt.Errorf("state manifest: %w", err)
	}
	if m.Format != manifestFormat {
		return nil, fmt.Errorf("state manifest: format %q, want %q", m.Format, manifestFormat)
	}
	if m.Seq != seqs[0] {
		return nil, fmt.Errorf("state manifest: seq %d in directory %s", m.Seq, filepath.Base(dir))
	}
	sv := &Saved{Manifest: &m, Data: map[string][]byte{}, Versions: map[string]string{}, Bad: map[string]string{}}
	for _, v := range m.Views {
		if !validName(v.Name) {
			return nil, fmt.Errorf("state manifest: view name %q", v.Name)
		}
		b, err := os.ReadFile(filepath.Join(dir, v.Name+".snap"))
		if err != nil {
			sv.Bad[v.Name] = "missing"
			continue
		}
		sum := sha256.Sum256(b)
		if int64(len(b)) != v.Bytes || hex.EncodeToString(sum[:]) != v.SHA256 {
			sv.Bad[v.Name] = "checksum mismatch"
			continue
		}
		sv.Data[v.Name], sv.Versions[v.Name] = b, v.Version
	}
	d.mu.Lock()
	d.loaded = &m
	d.mu.Unlock()
	return sv, nil
}

// Sizes returns the bytes on disk of each view in the newest snapshot
// saved or read, by name.
func (d *Dir) Sizes() map[string]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.last
	if m == nil {
		m = d.loaded
	}
	if m == nil {
		return nil
	}
	out := make(map[string]int64, len(m.Views))
	for _, v := range m.Views {
		out[v.Name] = v.Bytes
	}
	return out
}
