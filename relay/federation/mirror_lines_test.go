package federation

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestEachLine reads lines around and beyond the reader's buffer, blank
// lines and a last line without a newline, through a reader that returns
// a byte at a time and one that returns everything at once.
func TestEachLine(t *testing.T) {
	long := strings.Repeat("x", 3<<20+17) // longer than the 1 MiB buffer
	edge := strings.Repeat("y", 1<<20-1)  // with its newline, exactly the buffer
	lines := []string{"first", long, "", "  padded  ", edge, "after", "last without newline"}
	input := strings.Join(lines, "\n")
	want := []string{"first", long, "padded", edge, "after", "last without newline"}
	for name, r := range map[string]func() io.Reader{
		"whole":       func() io.Reader { return strings.NewReader(input) },
		"byte a time": func() io.Reader { return iotest.OneByteReader(strings.NewReader(input)) },
	} {
		var got []string
		if err := eachLine(r(), MaxPeerLine, func(b []byte) bool { got = append(got, string(b)); return true }); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d lines, want %d", name, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: line %d has %d bytes, want %d", name, i, len(got[i]), len(want[i]))
			}
		}
	}
	n := 0
	err := eachLine(strings.NewReader("a\nb\nc\n"), MaxPeerLine, func([]byte) bool { n++; return n < 2 })
	if err != errStopped || n != 2 {
		t.Fatalf("stopping after 2 lines: %v after %d", err, n)
	}
	boom := io.ErrUnexpectedEOF
	err = eachLine(io.MultiReader(strings.NewReader("a\n"), iotest.ErrReader(boom)), MaxPeerLine, func([]byte) bool { return true })
	if err != boom {
		t.Fatalf("a read error: got %v", err)
	}
	// A line longer than the cap is a capError, whether it ends or not,
	// and the reader stops about there.
	for _, tail := range []string{"\n", ""} {
		cr := &countingReader{r: strings.NewReader("ok\n" + strings.Repeat("z", 5<<20) + tail)}
		var got []string
		err = eachLine(cr, 3<<20, func(b []byte) bool { got = append(got, string(b)); return true })
		if !isCapError(err) || len(got) != 1 || cr.n > 4<<20+64 {
			t.Fatalf("a 5 MiB line under a 3 MiB cap: %v after %d lines, %d bytes read", err, len(got), cr.n)
		}
	}
	if err := eachLine(strings.NewReader(strings.Repeat("z", 3<<20)+"\n"), 3<<20, func([]byte) bool { return true }); err != nil {
		t.Fatalf("a line of exactly the cap: %v", err)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// FuzzEachLine: whatever a peer sends, eachLine either hands over every
// non-blank line (trimmed) in order, none longer than the cap, or stops
// with a capError at a line longer than the cap.
func FuzzEachLine(f *testing.F) {
	for _, seed := range []string{"", "a\nb\n", "  x  \r\n\n", strings.Repeat("z", 40) + "\nshort", "\n\n\n", "data: {}\n: keepalive\n"} {
		f.Add(seed)
	}
	const max = 16
	f.Fuzz(func(t *testing.T, in string) {
		var got []string
		err := eachLine(strings.NewReader(in), max, func(b []byte) bool { got = append(got, string(b)); return true })
		var want []string
		tooLong := false
		for _, l := range strings.Split(in, "\n") {
			if len(strings.TrimRight(l, "\r")) > max {
				tooLong = true
				break
			}
			if l = strings.TrimSpace(l); l != "" {
				want = append(want, l)
			}
		}
		if tooLong != isCapError(err) || !tooLong && err != nil {
			t.Fatalf("%q: error %v, a line over the cap %v", in, err, tooLong)
		}
		if !tooLong && strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%q: lines %q, want %q", in, got, want)
		}
		for _, l := range got {
			if len(l) > max {
				t.Fatalf("%q: handed over a line of %d bytes", in, len(l))
			}
		}
	})
}
