package explorer_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

var consoleMu sync.Mutex

// listenConsole appends the tab's console messages and uncaught
// exceptions to logs (shown when a test fails).
func listenConsole(ctx context.Context, logs *[]string) {
	chromedp.ListenTarget(ctx, func(ev any) {
		consoleMu.Lock()
		defer consoleMu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			s := string(ev.Type) + ":"
			for _, a := range ev.Args {
				s += " " + string(a.Value) + a.Description
			}
			*logs = append(*logs, s)
		case *runtime.EventExceptionThrown:
			*logs = append(*logs, fmt.Sprintf("exception: %s", ev.ExceptionDetails.Text+" "+exceptionText(ev.ExceptionDetails)))
		}
	})
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil {
		return d.Exception.Description
	}
	return ""
}
