package relay

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/relay/stream"
	"github.com/anp2net/relay/trust"
	"github.com/labstack/echo/v4"
)

// newHub builds the event stream over the log: it shows each reader what
// §7.1 lets them see and greets authors with notices of their hidden
// events (§7.2).
func (s *Server) newHub() *stream.Hub {
	return stream.NewHub(stream.Options{
		Backlog:        s.store.Export,
		MaxSubscribers: s.cfg.MaxSubscribers,
		Logger:         s.cfg.Logger,
		Visible: func(reader string, e *protocol.Event) bool {
			return !s.state.Revoked(e.ID) && s.viewer(reader, false).sees(e.ID, e.AgentID)
		},
		Notices: func(_ context.Context, reader string) ([][]byte, error) {
			var out [][]byte
			for _, h := range s.state.Moderation.Current(s.now()).HiddenBy(reader) {
				b, _ := json.Marshal(map[string]any{"event_id": h.EventID, "hidden": true,
					"flag_count": h.FlagCount, "first_hidden_at": h.FirstHiddenAt})
				out = append(out, b)
			}
			return out, nil
		},
	})
}

// publishToStream is the commit hook feeding the stream.
func (s *Server) publishToStream(batch []sqlite.Committed) {
	items := make([]stream.Item, len(batch))
	for i, c := range batch {
		items[i] = stream.Item{Seq: c.Seq, Event: c.Event}
	}
	s.hub.Publish(items)
}

// notifyAuthors sends each author an event: meta notice when one of their
// events becomes hidden or visible again (§7.2).
func (s *Server) notifyAuthors(snap *trust.ModSnapshot) {
	if s.hub == nil {
		return
	}
	for _, ch := range snap.Changed {
		if ch.Author == "" {
			continue
		}
		ev := snap.Event(ch.EventID)
		b, _ := json.Marshal(map[string]any{"event_id": ch.EventID, "hidden": ch.Visibility == trust.Hidden,
			"visibility": ch.Visibility, "at": ch.At, "flag_count": ev.FlagCount, "first_hidden_at": ev.FirstHiddenAt})
		s.hub.Notify(ch.Author, b)
	}
}

// getStream is GET /stream (SPEC §3.3).
func (s *Server) getStream(c echo.Context) error {
	f, err := stream.ParseFilter(c.QueryParams())
	if err != nil {
		return err
	}
	reader, err := s.reader(c)
	if err != nil {
		return err
	}
	ip := c.RealIP()
	if !s.streams.acquire(ip, s.cfg.MaxStreamsPerIP) {
		return &retryError{err: protocol.Errorf(CodeRateLimited, "too many open streams from %s", ip), after: 5}
	}
	defer s.streams.release(ip)
	err = s.hub.Serve(c.Response(), c.Request(), f, reader)
	var busy *stream.BusyError
	if errors.As(err, &busy) {
		return &retryError{err: busy.Err, after: busy.RetryAfterSeconds()}
	}
	return err
}

// ipStreams counts each client address's open streams.
type ipStreams struct {
	mu   sync.Mutex
	open map[string]int
}

// acquire takes a stream slot for ip unless it already holds max (0: 64,
// negative: no cap).
func (c *ipStreams) acquire(ip string, max int) bool {
	if max == 0 {
		max = 64
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if max > 0 && c.open[ip] >= max {
		return false
	}
	if c.open == nil {
		c.open = map[string]int{}
	}
	c.open[ip]++
	return true
}

func (c *ipStreams) release(ip string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[ip]--; c.open[ip] <= 0 {
		delete(c.open, ip)
	}
}
