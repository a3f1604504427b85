package explorer_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/chromedp/chromedp"
	"golang.org/x/mod/sumdb/note"
)

// alarmOrigin is the log the browser tests' relay witnesses
// (--tlog-witnessed), so it can be caught in an alarm.
const alarmOrigin = "alarm.test/tlog"

// alarmHostile is text an alarm's evidence carries that would run script
// if the page parsed it as HTML.
const alarmHostile = `<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>`

// addCheckpoint submits a checkpoint of alarmOrigin of size with root
// (extension lines ext) to the relay's witness and returns the status
// and the answer.
func addCheckpoint(t *testing.T, old, size int64, root byte, ext string) (int, string) {
	t.Helper()
	text := fmt.Sprintf("%s\n%d\n%s\n%s", alarmOrigin, size, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{root}, 32)), ext)
	signed, err := note.Sign(&note.Note{Text: text}, bt.alarmSigner)
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Appendf(nil, "old %d\n\n%s", old, signed)
	resp, err := http.Post(bt.base+"/tlog/witness/add-checkpoint", "text/plain", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("add-checkpoint old %d size %d: %d %s", old, size, resp.StatusCode, b)
	return resp.StatusCode, string(b)
}

// TestNetworkShowsTlogAlarms: the relay's witness verifies a checkpoint
// of alarm.test/tlog, then refuses another of the same size with another
// root (a split view, signed by the same key) and reports it as a kind 24
// signed by the relay key. A relay announcing https://alarm.test is then
// marked on the network page with its alarm count, as GET /relays says;
// the alarm is listed with the relay as reporter, its detail and both
// signed checkpoints; a kind 24 any agent forges is listed as not the
// word of a relay. Hostile text in either is shown as text, never run.
func TestNetworkShowsTlogAlarms(t *testing.T) {
	needBrowser(t)
	// (Run again with -count, the witness already holds the first.)
	if s, b := addCheckpoint(t, 0, 3, 1, ""); s != http.StatusOK && (s != http.StatusConflict || strings.TrimSpace(b) != "3") {
		t.Fatalf("first checkpoint: %d %s", s, b)
	}
	if s, _ := addCheckpoint(t, 3, 3, 2, alarmHostile+"\n"); s != http.StatusUnprocessableEntity {
		t.Fatalf("split view: %d, want 422", s)
	}
	now := time.Now().Unix()
	op := taskstest.NewAgent("alarm-relay-operator")
	post(t, bt.base, op.Sign(protocol.KindRelayAnnounce, now, `{"url":"https://alarm.test","preferred_branch":"main","served_branches":["main"]}`))
	mallory := taskstest.NewAgent("alarm-forger")
	forged, _ := json.Marshal(map[string]string{"origin": "forged.test/tlog", "old": alarmHostile, "new": "x", "detail": alarmHostile})
	post(t, bt.base, mallory.Sign(24, now, string(forged), []string{"t", "tlog-alarm"}))

	// GET /relays marks the announced relay; the relay's report is stored.
	alarms := 0
	deadline := time.Now().Add(30 * time.Second)
	for {
		var rel struct {
			Self struct {
				AgentID string `json:"agent_id"`
			}
			Relays []struct {
				URL        string
				TlogAlarm  bool `json:"tlog_alarm"`
				TlogAlarms int  `json:"tlog_alarms"`
			}
		}
		var reports []protocol.Event
		getJSON(t, bt.base+"/relays", &rel)
		getJSON(t, bt.base+"/events?kinds=24&authors="+rel.Self.AgentID, &reports)
		alarms = 0
		for _, r := range rel.Relays {
			if r.URL == "https://alarm.test" && r.TlogAlarm {
				alarms = r.TlogAlarms
			}
		}
		if alarms >= 1 && len(reports) == alarms {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: /relays %+v, %d kind 24 by the relay", rel, len(reports))
		}
		time.Sleep(100 * time.Millisecond)
	}

	ctx := tab(t)
	text := open(t, ctx, "network", "network")
	for _, s := range []string{"This relay's witness holds transparency-log alarms against 1 relay", fmt.Sprintf("⚠ %d alarm", alarms),
		"Transparency-log alarms", alarmOrigin, "same size, another root", "this relay's witness", "forged.test/tlog",
		"anyone may publish a kind 24"} {
		if !strings.Contains(text, s) {
			t.Errorf("network page lacks %q:\n%s", s, text)
		}
	}
	var page struct {
		Mark     string // data-tlog-alarms of the alarm.test relay's row
		Signers  []string
		Evidence string // the relay's report's evidence, as text
		Injected int    // img and script elements inside main
		Pwned    bool
	}
	err := chromedp.Run(ctx, chromedp.Evaluate(`(() => {
		const row = [...document.querySelectorAll('tr')].find((tr) => tr.textContent.includes('https://alarm.test'));
		const mark = row && row.querySelector('[data-tlog-alarms]');
		const items = [...document.querySelectorAll('#tlog-alarms > li')];
		const mine = items.find((li) => li.dataset.alarmSigner === 'self');
		return {
			Mark: mark ? mark.dataset.tlogAlarms : '',
			Signers: items.map((li) => li.dataset.alarmSigner),
			Evidence: mine ? mine.querySelector('details').textContent : '',
			Injected: document.querySelectorAll('main img, main script').length,
			Pwned: window.pwned !== undefined,
		};
	})()`, &page))
	if err != nil {
		t.Fatal(err)
	}
	if page.Mark != fmt.Sprint(alarms) {
		t.Errorf("the alarm.test relay's row is marked %q, want %d alarms", page.Mark, alarms)
	}
	if signers := strings.Join(page.Signers, ","); !strings.Contains(signers, "self") || !strings.Contains(signers, "unknown") || strings.Contains(signers, "relay") {
		t.Errorf("alarm reporters %v, want this relay's and an unknown agent's", page.Signers)
	}
	// Both signed notes are shown: the verified one (root 0x01…) and the
	// refused one (root 0x02…, with its hostile extension line as text).
	for _, s := range []string{alarmOrigin + "\n3\n" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32)),
		base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32)) + "\n" + alarmHostile, "— " + alarmOrigin} {
		if !strings.Contains(page.Evidence, s) {
			t.Errorf("evidence lacks %q:\n%s", s, page.Evidence)
		}
	}
	if page.Injected != 0 || page.Pwned {
		t.Errorf("hostile alarm text became markup: %d img/script elements, script ran %v", page.Injected, page.Pwned)
	}
}
