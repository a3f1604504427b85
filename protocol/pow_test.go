package protocol

import (
	"context"
	"testing"
	"time"
)

func TestLeadingZeroBits(t *testing.T) {
	cases := []struct {
		b0, b1 byte
		want   int
	}{{0x80, 0, 0}, {0x40, 0, 1}, {0x01, 0, 7}, {0, 0x80, 8}, {0, 0x0f, 12}, {0, 0, 16}}
	for _, c := range cases {
		var id [32]byte
		id[0], id[1] = c.b0, c.b1
		if c.b0 == 0 && c.b1 == 0 {
			id[2] = 0xff
		}
		if got := LeadingZeroBits(id); got != c.want {
			t.Errorf("%x %x: got %d want %d", c.b0, c.b1, got, c.want)
		}
	}
	if LeadingZeroBits([32]byte{}) != 256 {
		t.Error("all-zero id")
	}
}

func TestMineThenCheck(t *testing.T) {
	p := DefaultPoWPolicy()
	p.ActiveFrom = 0
	e := &Event{CreatedAt: 1763800000, Kind: 0, Tags: [][]string{{"pow", "3"}, {"t", "x"}}, Content: `{"name":"m"}`, AgentID: AgentIDOf(testKey)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Mine(ctx, e, 12); err != nil {
		t.Fatal(err)
	}
	e.Sign(testKey)
	id, _ := e.IDBytes()
	if err := p.Check(e, id); err != nil {
		t.Fatal(err)
	}
	if LeadingZeroBits(id) < 12 {
		t.Fatal("mined id too weak")
	}
	if n := len(e.TagValues("pow")); n != 1 {
		t.Fatalf("%d pow tags after mining", n)
	}
}

func TestPoWPolicy(t *testing.T) {
	p := DefaultPoWPolicy()
	cases := []struct {
		name      string
		kind      int64
		createdAt int64
		tags      [][]string
		want      string
	}{
		{"kind 0 without pow", 0, p.ActiveFrom, nil, CodePoWRequired},
		{"kind 0 before activation", 0, p.ActiveFrom - 1, nil, ""},
		{"kind 50 below minimum", 50, p.ActiveFrom, [][]string{{"pow", "8"}}, CodePoWBelowMinimum},
		{"kind 1 low pow fine", 1, p.ActiveFrom, [][]string{{"pow", "0"}}, ""},
		{"malformed", 1, p.ActiveFrom, [][]string{{"pow", "x"}}, CodePoWMalformed},
		{"no value", 1, p.ActiveFrom, [][]string{{"pow"}}, CodePoWMalformed},
		{"huge", 1, p.ActiveFrom, [][]string{{"pow", "999"}}, CodePoWMalformed},
		{"over-claim", 1, p.ActiveFrom, [][]string{{"pow", "200"}}, CodePoWNotMet},
	}
	for _, c := range cases {
		e := &Event{Kind: c.kind, CreatedAt: c.createdAt, Tags: c.tags}
		var id [32]byte
		id[0] = 0xff
		if got := codeOf(p.Check(e, id)); got != c.want {
			t.Errorf("%s: got %q want %q", c.name, got, c.want)
		}
	}
}

func TestLimits(t *testing.T) {
	l := DefaultLimits()
	const now = 1_800_000_000
	big := make([]byte, 65537)
	tags := make([][]string, 33)
	for i := range tags {
		tags[i] = []string{"t", "x"}
	}
	cases := []struct {
		e    Event
		want string
	}{
		{Event{CreatedAt: now, Content: string(big)}, CodeContentTooLarge},
		{Event{CreatedAt: now, Tags: tags}, CodeTooManyTags},
		{Event{CreatedAt: now, Tags: [][]string{{"t", string(big[:1025])}}}, CodeTagTooLarge},
		{Event{CreatedAt: now + 301}, CodeTooFarFuture},
		{Event{CreatedAt: now - 7*86400 - 1}, CodeTooFarPast},
		{Event{CreatedAt: now + 300, Content: string(big[:65536])}, ""},
	}
	for i, c := range cases {
		errs := l.Check(&c.e, now)
		got := ""
		if len(errs) > 0 {
			got = codeOf(errs[0])
		}
		if got != c.want {
			t.Errorf("case %d: got %q want %q", i, got, c.want)
		}
	}
}
