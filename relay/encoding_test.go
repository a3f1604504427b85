package relay

import (
	"bytes"
	"compress/gzip"
	"errors"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/anp2net/relay/protocol"
)

// FuzzDecodeBody: whatever bytes arrive under whatever Content-Encoding,
// the body decoder returns at most its limit or a coded 4xx error, never
// panics; and a body that gzip or zstd encodes decodes back to itself
// when it fits.
func FuzzDecodeBody(f *testing.F) {
	const limit = 4 << 10
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(bytes.Repeat([]byte("a"), 3*limit))
	zw.Close()
	ze, _ := zstd.NewWriter(nil)
	f.Add("gzip", gz.Bytes(), []byte(`{"kind":1}`))
	f.Add("zstd", ze.EncodeAll(bytes.Repeat([]byte("b"), 3*limit), nil), []byte(`{"kind":1}`))
	f.Add("zstd", []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58}, []byte{})
	f.Add("identity", []byte("plain"), []byte("x"))
	f.Add("br", []byte("x"), []byte("y"))
	ze.Close()
	d, err := newBodyDecoder(limit)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, ce string, body, plain []byte) {
		out, err := d.decode(ce, body)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) || (pe.Code != CodeBodyTooLarge && pe.Code != CodeBadParameter && pe.Code != CodeUnsupportedEncoding) {
				t.Fatalf("decode(%q): uncoded error %v", ce, err)
			}
		} else if len(out) > limit && ce != "" && ce != "identity" {
			t.Fatalf("decode(%q) returned %d bytes past the limit %d", ce, len(out), limit)
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(plain)
		zw.Close()
		ze, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		zb := ze.EncodeAll(plain, nil)
		ze.Close()
		for ce, enc := range map[string][]byte{"gzip": gz.Bytes(), "zstd": zb} {
			out, err := d.decode(ce, enc)
			if len(plain) > limit {
				if err == nil {
					t.Fatalf("%s: %d decoded bytes accepted past the limit", ce, len(plain))
				}
				continue
			}
			if err != nil || !bytes.Equal(out, plain) {
				t.Fatalf("%s round trip of %d bytes: %v", ce, len(plain), err)
			}
		}
	})
}
