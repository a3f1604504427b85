package reconcile

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

func TestVarint(t *testing.T) {
	tests := []struct {
		v   uint64
		hex string
	}{
		{0, "00"}, {1, "01"}, {127, "7f"}, {128, "8100"}, {300, "822c"}, {16383, "ff7f"}, {16384, "818000"},
		{1<<64 - 1, "81ffffffffffffffff7f"},
	}
	for _, tt := range tests {
		b := appendVarint(nil, tt.v)
		if hex.EncodeToString(b) != tt.hex || varintLen(tt.v) != len(b) {
			t.Errorf("appendVarint(%d) = %x, want %s", tt.v, b, tt.hex)
		}
		r := reader{buf: b}
		if got, err := r.varint(); err != nil || got != tt.v || len(r.buf) != 0 {
			t.Errorf("varint(%s) = %d, %v", tt.hex, got, err)
		}
	}
}

// h builds a message from hex pieces, ignoring spaces.
func h(parts ...string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(strings.Join(parts, ""), " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

var (
	fp16 = strings.Repeat("ab", 16)
	id32 = strings.Repeat("cd", 32)
)

func TestDecodeMessage(t *testing.T) {
	ts := func(v uint64, prefix ...byte) Bound { b := Bound{Timestamp: v}; copy(b.ID[:], prefix); return b }
	tests := []struct {
		name string
		msg  []byte
		want []Range
	}{
		{"empty: everything skipped", h("61"), nil},
		{"skip to infinity", h("61 00 00 00"), []Range{{Upper: Infinity}}},
		{"fingerprint", h("61 00 00 01", fp16), []Range{{Upper: Infinity, Mode: ModeFingerprint, Fingerprint: Fingerprint(h(fp16))}}},
		{"empty id list", h("61 00 00 02 00"), []Range{{Upper: Infinity, Mode: ModeIDList, IDs: [][32]byte{}}}},
		{"one id", h("61 00 00 02 01", id32), []Range{{Upper: Infinity, Mode: ModeIDList, IDs: [][32]byte{[32]byte(h(id32))}}}},
		{"delta timestamps and prefixes", h("61 8b 15 00 00  01 01 7f 01", fp16, " 05 02 0102 00"), []Range{
			{Upper: ts(1428)},
			{Upper: ts(1428, 0x7f), Mode: ModeFingerprint, Fingerprint: Fingerprint(h(fp16))},
			{Upper: ts(1432, 1, 2)},
		}},
		{"trailing zeros in a prefix are accepted", h("61 02 02 0500 00"), []Range{{Upper: ts(1, 5)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeMessage(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
			enc, err := EncodeMessage(got)
			if err != nil {
				t.Fatal(err)
			}
			if again, err := DecodeMessage(enc); err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("re-encoding %x decodes to %+v, %v", enc, again, err)
			}
		})
	}
}

func TestDecodeMessageRejects(t *testing.T) {
	tests := []struct {
		name string
		msg  []byte
		code string
	}{
		{"no bytes", nil, CodeBadMessage},
		{"not a version byte", h("00"), CodeBadMessage},
		{"another version", h("62"), CodeUnsupportedVersion},
		{"non-minimal varint", h("61 8001 00 00"), CodeBadMessage},
		{"varint over 64 bits", h("61 ffffffffffffffffff7f 00 00"), CodeBadMessage},
		{"truncated varint", h("61 00 00 00 ff"), CodeBadMessage},
		{"prefix of 33 bytes", h("61 02 21", strings.Repeat("01", 33), "00"), CodeBadMessage},
		{"prefix on infinity", h("61 00 01 ab 00"), CodeBadMessage},
		{"empty first range", h("61 01 00 00"), CodeBadMessage},
		{"bounds not increasing", h("61 02 00 00 01 00 00"), CodeBadMessage},
		{"bound after infinity", h("61 00 00 00 00 00 00"), CodeBadMessage},
		{"timestamp reaches infinity", h("61 81ffffffffffffffff7f 00 00 02 00 00"), CodeBadMessage},
		{"unknown mode", h("61 00 00 03"), CodeBadMessage},
		{"truncated fingerprint", h("61 00 00 01", fp16[2:]), CodeBadMessage},
		{"id list overruns", h("61 00 00 02 02", id32), CodeBadMessage},
		{"huge id count", h("61 00 00 02 8fffffff7f"), CodeBadMessage},
		{"trailing garbage", h("61 00 00 02 01", id32, "07"), CodeBadMessage},
		{"too long", append([]byte{Version}, make([]byte, MaxMessageSize)...), CodeBadMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeMessage(tt.msg)
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != tt.code {
				t.Fatalf("err = %v, want code %s", err, tt.code)
			}
			if verr := validate(tt.msg); verr == nil {
				t.Fatal("validate accepts what DecodeMessage rejects")
			}
		})
	}
}

func TestEncodeMessageRejects(t *testing.T) {
	for name, rs := range map[string][]Range{
		"empty first range": {{Upper: Bound{}}},
		"decreasing":        {{Upper: Bound{Timestamp: 5}}, {Upper: Bound{Timestamp: 4}}},
		"unknown mode":      {{Upper: Infinity, Mode: 7}},
	} {
		if _, err := EncodeMessage(rs); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRespondVersions(t *testing.T) {
	idx := NewIndex(nil)
	if reply, err := Respond(idx, h("62")); err != nil || !bytes.Equal(reply, []byte{Version}) {
		t.Fatalf("unsupported version: reply %x, %v; want %x", reply, err, Version)
	}
	if _, err := Respond(idx, h("41")); err == nil {
		t.Fatal("non-version byte accepted")
	}
	sess := NewSession(idx)
	sess.Initiate()
	var pe *protocol.Error
	if _, _, _, err := sess.Reconcile(h("60")); !errors.As(err, &pe) || pe.Code != CodeUnsupportedVersion {
		t.Fatalf("client accepted a version 0 reply: %v", err)
	}
}
