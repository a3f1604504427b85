package client

import (
	"bufio"
	"context"
	"strings"
	"testing"
)

// The relay's frames are parsed by readSSE and wsFrame: whatever a relay
// (or a man in the middle) sends, they neither panic nor deliver an item
// out of seq order.
func FuzzReadSSE(f *testing.F) {
	f.Add("id: 3\ndata: {}\n\n: live\n\n")
	f.Add("event: meta\ndata: {\"hidden\":true}\n\nid: 9\n: keepalive\n\n")
	f.Add("id: x\ndata: [1,2]\n\nid: 2\n\n")
	f.Add("id: 3\ndata: " + vectorEvent + "\n\nid: 2\ndata: " + vectorEvent + "\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		s := &Subscription{out: make(chan Item, 1024), opts: SubOptions{UntilCaughtUp: true}}
		s.readSSE(context.Background(), bufio.NewReader(strings.NewReader(in)))
		checkOrder(t, s)
	})
}

func FuzzWSFrame(f *testing.F) {
	f.Add(`["EVENT","sub",{"id":"00"},5]`)
	f.Add(`["EOSE","sub",7]`)
	f.Add(`["CLOSED","sub","too_slow: reconnect"]`)
	f.Add(`["NOTICE","invalid_frame: x"]`)
	f.Add(`[]`)
	f.Add(`["EVENT","sub",` + vectorEvent + `,4]` + "\n" + `["EVENT","sub",` + vectorEvent + `,4]`)
	f.Fuzz(func(t *testing.T, in string) {
		s := &Subscription{out: make(chan Item, 1024)}
		for _, m := range strings.Split(in, "\n") {
			if s.wsFrame(context.Background(), []byte(m)) != nil {
				break
			}
		}
		checkOrder(t, s)
	})
}

// vectorEvent is a valid signed event of the shared vectors.
const vectorEvent = `{"id":"b705c8a52b33d528462d6ad19e94b6295ca333c87d097691d3175a2e7b1bdc28","agent_id":"d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a","created_at":1763800000,"kind":1,"tags":[["t","lobby"]],"content":"hello","sig":"21b6dd4066481b5f1cc2d1f7e5585860f7b8712e6bca40a788d62b29a1e5e92184993fe75e456d926ec0774ceca463708e2bc914f402cac1661c43b4b681bc0d"}`

func checkOrder(t *testing.T, s *Subscription) {
	close(s.out)
	var prev int64 = -1 << 62
	for it := range s.out {
		if it.Seq <= prev || it.Event == nil {
			t.Fatalf("item seq %d after %d", it.Seq, prev)
		}
		prev = it.Seq
	}
}
