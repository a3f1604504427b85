package state

import (
	"encoding/binary"
	"fmt"
	"io"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// blockingFold counts its events; its encoder announces itself on entered
// and waits for release before it writes the count it captured.
type blockingFold struct {
	n                 int
	entered, released chan struct{}
}

func (b *blockingFold) Add(*protocol.Event)     { b.n++ }
func (b *blockingFold) Remove(*protocol.Event)  { b.n-- }
func (b *blockingFold) SnapshotVersion() string { return "blocking/1" }
func (b *blockingFold) Snapshot(w io.Writer) error {
	return b.CaptureSnapshot()(w)
}
func (b *blockingFold) Restore(io.Reader, func(string) *protocol.Event) error { return nil }
func (b *blockingFold) CaptureSnapshot() func(io.Writer) error {
	n := b.n
	return func(w io.Writer) error {
		b.entered <- struct{}{}
		<-b.released
		_, err := w.Write(binary.AppendUvarint(nil, uint64(n)))
		return err
	}
}

func plainEvent(i int) *protocol.Event {
	return &protocol.Event{ID: fmt.Sprintf("%064x", i+1), AgentID: fmt.Sprintf("%064x", 1000+i), Kind: protocol.KindPost, CreatedAt: 1779000000 + int64(i)}
}

// TestCaptureDoesNotHoldAdds: while a view's encoder is blocked, the
// composition's lock is free and an Add (a publish's fold) completes; the
// capture still describes the position it was taken at.
func TestCaptureDoesNotHoldAdds(t *testing.T) {
	bf := &blockingFold{entered: make(chan struct{}), released: make(chan struct{})}
	s := New(Options{Folds: []NamedFold{{"blocking", bf}}})
	for i := range 2 {
		s.Add(int64(i+1), plainEvent(i), nil)
	}
	type result struct {
		c   *Capture
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := s.Capture()
		done <- result{c, err}
	}()
	<-bf.entered
	if !s.mu.TryLock() {
		close(bf.released)
		<-done
		t.Fatal("the composition's lock is held while a view is encoded: publishes would wait for the encoding")
	}
	s.mu.Unlock()
	s.Add(3, plainEvent(2), nil) // completes while the encoder waits
	if s.Version() != 3 || bf.n != 3 {
		t.Fatalf("after an Add during the encoding: version %d, fold %d events", s.Version(), bf.n)
	}
	close(bf.released)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.c.Seq != 2 || r.c.Count != 2 {
		t.Fatalf("capture at seq %d count %d, want the position it was taken at (2, 2)", r.c.Seq, r.c.Count)
	}
	for _, v := range r.c.Views {
		if v.Name == "blocking" {
			if n, _ := binary.Uvarint(v.Data); n != 2 {
				t.Fatalf("the blocking view saved %d events, want the 2 it held at the capture", n)
			}
			return
		}
	}
	t.Fatal("the blocking view is missing from the capture")
}

// TestSaveKeepsNewerCapture: a capture whose encoding finished after a
// newer one was saved (a periodic save overlapping the stop's) does not
// replace the newer snapshot.
func TestSaveKeepsNewerCapture(t *testing.T) {
	s := New(Options{})
	s.Add(1, plainEvent(0), nil)
	older, err := s.Capture()
	if err != nil {
		t.Fatal(err)
	}
	s.Add(2, plainEvent(1), nil)
	newer, err := s.Capture()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := OpenDir(t.TempDir() + "/state")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dir.Save(newer); err != nil {
		t.Fatal(err)
	}
	m, err := dir.Save(older)
	if err != nil {
		t.Fatal(err)
	}
	if m.Seq != 2 {
		t.Fatalf("saving an older capture after a newer one wrote a manifest at seq %d", m.Seq)
	}
	sv, err := dir.Latest()
	if err != nil || sv.Manifest.Seq != 2 {
		t.Fatalf("latest after an older capture's save: %v %+v", err, sv.Manifest)
	}
}
