package explorer_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestNetworkMirrorStatus starts a second relay process mirroring the
// first and opens its network page: the peer, its direction and state
// and the counts of what it received are shown.
func TestNetworkMirrorStatus(t *testing.T) {
	needBrowser(t)
	dir := t.TempDir()
	cmd := exec.Command(bt.bin, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "mirror.db"), "--peer", bt.base, "--mirror-interval", "200ms")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr, err := listenAddr(stderr)
	if err != nil {
		t.Fatal(err)
	}
	mirror := "http://" + addr
	// Wait until the mirror has the world's last event.
	last := bt.w.events[len(bt.w.events)-1].ID
	if _, ok := waitFor(30*time.Second, func() bool { return getJSON(t, mirror+"/events/"+last+"?include_hidden=true", nil) != 404 }); !ok {
		t.Fatal("the mirror never caught up")
	}
	// A new mirror copies the peer's export first and lists the peer once
	// it follows it.
	if _, ok := waitFor(30*time.Second, func() bool {
		var r struct{ Peers []struct{ Peer string } }
		return getJSON(t, mirror+"/relays", &r) == 200 && len(r.Peers) > 0
	}); !ok {
		t.Fatal("the mirror never listed its peer")
	}
	ctx := tab(t)
	if err := chromedp.Run(ctx, chromedp.Navigate(mirror+"/#/network"), chromedp.WaitVisible(`main[data-ready="network"]`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	var text string
	chromedp.Run(ctx, chromedp.Text("main", &text, chromedp.ByQuery))
	_, peers, _ := strings.Cut(text, "Mirror status")
	peers, _, _ = strings.Cut(peers, "Branches, checkpoints")
	if !strings.Contains(peers, bt.base) || !strings.Contains(peers, "outbound") {
		t.Fatalf("the mirror's network page does not show its peer %s:\n%s", bt.base, text)
	}
}
