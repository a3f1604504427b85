package explorer_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"golang.org/x/mod/sumdb/note"
)

// The browser tests drive a real Chromium (Debian's chromium package)
// headless against a real `anp2 serve` process built from cmd/anp2,
// loaded with the public network sample (through `anp2 import`) and the
// test world's freshly signed events. One browser serves the package;
// each test opens its own tabs. Without a chromium binary they skip.

var bt struct {
	chromium string          // the browser binary, "" when none
	skip     string          // why the browser tests skip
	base     string          // the relay's URL
	bin      string          // the anp2 binary
	w        *world          // the data loaded
	browser  context.Context // the shared browser
	// alarmSigner signs checkpoints of the log "alarm.test/tlog", which
	// the relay witnesses (serve --tlog-witnessed), so a test can catch
	// it in an alarm (SPEC §21.5).
	alarmSigner note.Signer
}

// setup runs once, for the first test that needs the browser, so the
// unit tests alone start nothing.
var (
	setupOnce    sync.Once
	setupFailed  bool
	setupCleanup = func() {}
)

func TestMain(m *testing.M) {
	code := m.Run()
	setupCleanup()
	os.Exit(code)
}

// findChromium returns ANP2_CHROMIUM or the first Chromium on PATH.
func findChromium() string {
	if p := os.Getenv("ANP2_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// setupBrowser builds and starts the relay and the browser when a
// browser exists. A non-zero code means setup failed (said on stderr).
func setupBrowser() (int, func()) {
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	bt.chromium = findChromium()
	if bt.chromium == "" {
		bt.skip = "no chromium binary found (apt-get install chromium, or set ANP2_CHROMIUM): browser tests skipped"
		return 0, cleanup
	}
	if testing.Short() {
		bt.skip = "-short: browser tests skipped"
		return 0, cleanup
	}
	fail := func(format string, a ...any) (int, func()) {
		fmt.Fprintf(os.Stderr, "browser test setup: "+format+"\n", a...)
		return 1, cleanup
	}
	dir, err := os.MkdirTemp("", "anp2-explorer-")
	if err != nil {
		return fail("%v", err)
	}
	cleanups = append(cleanups, func() { os.RemoveAll(dir) })
	bt.bin = filepath.Join(dir, "anp2")
	if out, err := exec.Command("go", "build", "-o", bt.bin, "../../cmd/anp2").CombinedOutput(); err != nil {
		return fail("build: %v\n%s", err, out)
	}
	db := filepath.Join(dir, "relay.db")
	if out, err := exec.Command(bt.bin, "import", "--db", db, "../../testdata/vectors/anp2-network-sample.jsonl").CombinedOutput(); err != nil {
		return fail("import: %v\n%s", err, out)
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, alarmOrigin)
	if err != nil {
		return fail("%v", err)
	}
	if bt.alarmSigner, err = note.NewSigner(skey); err != nil {
		return fail("%v", err)
	}
	cmd := exec.Command(bt.bin, "serve", "--addr", "127.0.0.1:0", "--db", db, "--rate-agent", "0", "--rate-ip", "0",
		"--tlog-witnessed", vkey)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return fail("serve: %v", err)
	}
	cleanups = append(cleanups, func() { cmd.Process.Kill(); cmd.Wait() })
	addr, err := listenAddr(stderr)
	if err != nil {
		return fail("serve: %v", err)
	}
	bt.base = "http://" + addr
	bt.w = newWorld(time.Now().Unix())
	for _, e := range bt.w.events {
		if err := publish(bt.base, e); err != nil {
			return fail("%v", err)
		}
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bt.chromium),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.WindowSize(1280, 900),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	cleanups = append(cleanups, cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	cleanups = append(cleanups, cancelBrowser)
	if err := chromedp.Run(browser); err != nil {
		return fail("start %s: %v", bt.chromium, err)
	}
	bt.browser = browser
	return 0, cleanup
}

var listenRe = regexp.MustCompile(`relay listening"? addr=(\S+)`)

// listenAddr reads the relay's log until it says where it listens.
func listenAddr(stderr io.Reader) (string, error) {
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listenRe.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case a := <-found:
		return a, nil
	case <-time.After(60 * time.Second):
		return "", fmt.Errorf("the relay did not start")
	}
}

// needBrowser skips t when there is no browser.
func needBrowser(t *testing.T) {
	t.Helper()
	setupOnce.Do(func() {
		var code int
		code, setupCleanup = setupBrowser()
		setupFailed = code != 0
	})
	if setupFailed {
		t.Fatal("browser test setup failed (see above)")
	}
	if bt.skip != "" {
		t.Skip(bt.skip)
	}
}

// tab opens a new tab in the shared browser, closed when t ends.
func tab(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(bt.browser)
	t.Cleanup(cancel)
	var logs []string
	t.Cleanup(func() {
		if t.Failed() && len(logs) > 0 {
			t.Logf("browser console:\n%s", strings.Join(logs, "\n"))
		}
	})
	listenConsole(ctx, &logs)
	ctx, cancelT := context.WithTimeout(ctx, 45*time.Second)
	t.Cleanup(cancelT)
	// Every tab loads as a first visit would: nothing from the cache.
	if err := chromedp.Run(ctx, network.Enable(), network.SetCacheDisabled(true)); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// open navigates ctx to the explorer page hash and waits until the page
// says it has shown its data; it returns the page's text.
func open(t *testing.T, ctx context.Context, hash, page string) string {
	t.Helper()
	var text string
	start := time.Now()
	err := chromedp.Run(ctx,
		chromedp.Navigate(bt.base+"/#/"+hash),
		chromedp.WaitVisible(fmt.Sprintf(`main[data-ready]`), chromedp.ByQuery),
		chromedp.Text("main", &text, chromedp.ByQuery),
	)
	if err != nil {
		t.Fatalf("open #/%s: %v", hash, err)
	}
	took := time.Since(start).Round(time.Millisecond)
	// What the first load transferred: the page, its scripts and styles,
	// and the JSON it read (compressed sizes, as sent).
	var bytes int
	chromedp.Run(ctx, chromedp.Evaluate(`performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource')).reduce((s, e) => s + e.transferSize, 0)`, &bytes))
	t.Logf("#/%s shown in %v (navigation to data on screen), %d bytes transferred", hash, took, bytes)
	// Everything came from the relay: no CDN, no other origin.
	var foreign []string
	chromedp.Run(ctx, chromedp.Evaluate(`performance.getEntriesByType('resource').map((e) => e.name).filter((n) => !n.startsWith(location.origin + '/'))`, &foreign))
	if len(foreign) > 0 {
		t.Errorf("#/%s loaded from other origins: %v", hash, foreign)
	}
	if bytes > 200_000 {
		t.Errorf("#/%s: the first load transferred %d bytes, over the 200 KB budget", hash, bytes)
	}
	var ready string
	chromedp.Run(ctx, chromedp.AttributeValue("main", "data-ready", &ready, nil, chromedp.ByQuery))
	if ready != page {
		t.Fatalf("#/%s: page %q ready, want %q: %s", hash, ready, page, text)
	}
	return text
}

// awaitPromise makes Evaluate wait for the promise the script returns.
func awaitPromise(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }
