package tlog

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
)

// Error codes of the /tlog routes.
const (
	// CodePending: the entry is committed but not yet in the tree (503).
	CodePending = "tlog_pending"
	// CodeStalled: the tree stopped following the log (503).
	CodeStalled = "tlog_stalled"
)

// tileHeight is the C2SP tlog-tiles tile height.
const tileHeight = 8

// Cache-Control of full tiles (immutable) and of everything that changes.
const (
	cacheImmutable = "public, max-age=31536000, immutable"
	cacheShort     = "public, max-age=1"
)

func (m *Module) routes(core *relay.Server) {
	relay.RegisterStatus(CodePending, http.StatusServiceUnavailable)
	relay.RegisterStatus(CodeStalled, http.StatusServiceUnavailable)
	core.Route(http.MethodGet, "/tlog/checkpoint", m.getCheckpoint)
	core.Route(http.MethodGet, "/tlog/key", m.getKey)
	core.Route(http.MethodGet, "/tlog/tile/*", m.getTile)
	core.Route(http.MethodGet, "/tlog/proof", m.getProof)
	core.Route(http.MethodGet, "/tlog/consistency", m.getConsistency)
	core.Route(http.MethodPost, "/tlog/witness/add-checkpoint", m.addCheckpoint)
	core.Route(http.MethodGet, "/tlog/witness/key", func(c echo.Context) error {
		return c.String(http.StatusOK, m.wkey+"\n")
	})
}

func (m *Module) getKey(c echo.Context) error {
	c.Response().Header().Set(echo.HeaderCacheControl, cacheShort)
	return c.String(http.StatusOK, m.vkey+"\n")
}

func (m *Module) getCheckpoint(c echo.Context) error {
	cp, err := m.checkpoint(0, false)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderCacheControl, cacheShort)
	return c.Blob(http.StatusOK, "text/plain; charset=utf-8", cp.Note)
}

// getTile serves tile/<L>/<N>[.p/<W>] (hash tiles, read from the tree
// file) and tile/entries/<N>[.p/<W>] (entry bundles: each entry a
// big-endian uint16 length, 32, and the 32 raw bytes of an event id).
func (m *Module) getTile(c echo.Context) error {
	rest := c.Param("*")
	p := "tile/" + strconv.Itoa(tileHeight) + "/" + rest
	if r, ok := strings.CutPrefix(rest, "entries/"); ok {
		p = "tile/" + strconv.Itoa(tileHeight) + "/data/" + r
	}
	t, err := tlog.ParseTilePath(p)
	level := max(t.L, 0)
	// A tile of level L spans 256^(L+1) entries: N past 2^(62-8(L+1))
	// would overflow the end below (and no tree is that large).
	if err != nil || t.L > 4 || t.N >= 1<<(62-tileHeight*(level+1)) {
		return protocol.Errorf(relay.CodeNotFound, "no such tile %q", rest)
	}
	end := (t.N<<tileHeight + int64(t.W)) << (tileHeight * level)
	if end <= 0 || end > m.tree.Size() {
		return protocol.Errorf(relay.CodeNotFound, "tile %q is beyond the tree (%d entries)", rest, m.tree.Size())
	}
	var data []byte
	if t.L < 0 {
		data, err = m.entries(c, t.N<<tileHeight, t.W)
	} else {
		data, err = tlog.ReadTileData(t, m.tree)
	}
	if err != nil {
		return err
	}
	cache := cacheShort
	if t.W == 1<<tileHeight {
		cache = cacheImmutable
	}
	c.Response().Header().Set(echo.HeaderCacheControl, cache)
	return c.Blob(http.StatusOK, "application/octet-stream", data)
}

// entries returns the entry bundle of the w entries from index start.
func (m *Module) entries(c echo.Context, start int64, w int) ([]byte, error) {
	out := make([]byte, 0, w*34)
	done := errors.New("done")
	n := 0
	err := m.log.Export(c.Request().Context(), start, func(int64) error { return nil }, func(seq int64, body []byte) error {
		if seq != start+int64(n)+1 {
			return fmt.Errorf("tlog: the log has no event at seq %d", start+int64(n)+1)
		}
		id, err := idOf(body)
		if err != nil {
			return err
		}
		out = binary.BigEndian.AppendUint16(out, 32)
		out = append(out, id[:]...)
		if n++; n == w {
			return done
		}
		return nil
	})
	if err != nil && !errors.Is(err, done) {
		return nil, err
	}
	if n != w {
		return nil, fmt.Errorf("tlog: the log holds %d of the tile's %d entries", n, w)
	}
	return out, nil
}

// ProofAnswer is the body of GET /tlog/proof: an RFC 9162 inclusion
// proof of the entry at Index in the tree of Size leaves whose root is
// Root (hex), with the latest checkpoint.
type ProofAnswer struct {
	Index      int64    `json:"index"`
	Size       int64    `json:"size"`
	Root       string   `json:"root"`
	Proof      []string `json:"proof"`
	Checkpoint string   `json:"checkpoint"`
}

func (m *Module) getProof(c echo.Context) error {
	id := c.QueryParam("id")
	if !protocol.IsHex64(id) {
		return protocol.Errorf(relay.CodeBadParameter, "id must be 64 lowercase hex characters")
	}
	st, err := m.log.Get(c.Request().Context(), id)
	if errors.Is(err, eventlog.ErrNotFound) {
		return protocol.Errorf(relay.CodeNotFound, "event %s is not in this log", id)
	}
	if err != nil {
		return err
	}
	index := st.Seq - 1
	cp, err := m.fresh(index + 1)
	if err != nil {
		return err
	}
	size, err := sizeParam(c, "size", cp.Size)
	if err != nil {
		return err
	}
	if size <= index || size > m.tree.Size() {
		return protocol.Errorf(relay.CodeBadParameter, "size must be above the entry's index %d and at most the tree's size %d", index, m.tree.Size())
	}
	p, err := tlog.ProveRecord(size, index, m.tree)
	if err != nil {
		return err
	}
	root, err := tlog.TreeHash(size, m.tree)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ProofAnswer{Index: index, Size: size, Root: hex.EncodeToString(root[:]),
		Proof: hexes(p), Checkpoint: string(cp.Note)})
}

// ConsistencyAnswer is the body of GET /tlog/consistency: an RFC 9162
// consistency proof between the trees of From and To leaves (roots in
// hex), with the latest checkpoint.
type ConsistencyAnswer struct {
	From       int64    `json:"from"`
	To         int64    `json:"to"`
	FromRoot   string   `json:"from_root"`
	ToRoot     string   `json:"to_root"`
	Proof      []string `json:"proof"`
	Checkpoint string   `json:"checkpoint"`
}

func (m *Module) getConsistency(c echo.Context) error {
	cp, err := m.fresh(0)
	if err != nil {
		return err
	}
	to, err := sizeParam(c, "to", cp.Size)
	if err != nil {
		return err
	}
	from, err := sizeParam(c, "from", -1)
	if err != nil {
		return err
	}
	if from < 0 || from > to || to > m.tree.Size() {
		return protocol.Errorf(relay.CodeBadParameter, "want 0 ≤ from ≤ to ≤ %d (the tree's size)", m.tree.Size())
	}
	p := tlog.TreeProof{} // from the empty tree: nothing to prove
	if from > 0 {
		if p, err = tlog.ProveTree(to, from, m.tree); err != nil {
			return err
		}
	}
	ans := ConsistencyAnswer{From: from, To: to, Proof: hexes(p), Checkpoint: string(cp.Note)}
	for _, r := range []struct {
		n   int64
		out *string
	}{{from, &ans.FromRoot}, {to, &ans.ToRoot}} {
		h, err := tlog.TreeHash(r.n, m.tree)
		if err != nil {
			return err
		}
		*r.out = hex.EncodeToString(h[:])
	}
	return c.JSON(http.StatusOK, ans)
}

// fresh returns a checkpoint of at least min leaves, or the 503 that says
// why there is none.
func (m *Module) fresh(min int64) (*Checkpoint, error) {
	if msg := m.stalled.Load(); msg != nil && m.tree.Size() < min {
		return nil, protocol.Errorf(CodeStalled, "the tree stopped following the log: %s", *msg)
	}
	cp, err := m.checkpoint(min, false)
	if errors.Is(err, errPending) {
		return nil, protocol.Errorf(CodePending, "the entry is not in the tree yet; try again in a second")
	}
	return cp, err
}

// sizeParam reads a tree size parameter (def when absent).
func sizeParam(c echo.Context, name string, def int64) (int64, error) {
	v := c.QueryParam(name)
	if v == "" {
		if def < 0 {
			return 0, protocol.Errorf(relay.CodeBadParameter, "%s is required", name)
		}
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, protocol.Errorf(relay.CodeBadParameter, "%s must be a tree size (a non-negative integer)", name)
	}
	return n, nil
}

func hexes(hs []tlog.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = hex.EncodeToString(h[:])
	}
	return out
}

// decodeID decodes a 64-hex event id.
func decodeID(dst *[32]byte, id string) error {
	if len(id) != 64 {
		return fmt.Errorf("tlog: event id %q is not 64 hex characters", id)
	}
	_, err := hex.Decode(dst[:], []byte(id))
	return err
}

// labelEscaper escapes a Prometheus label value.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// metrics appends the tree's figures to GET /metrics.
func (m *Module) metrics(w io.Writer) {
	stalled := 0
	if m.stalled.Load() != nil {
		stalled = 1
	}
	cp := m.latest.Load()
	fmt.Fprintf(w, "# HELP anp2_tlog_size Leaves of the transparency log's tree.\n# TYPE anp2_tlog_size gauge\nanp2_tlog_size %d\n", m.tree.Size())
	fmt.Fprintf(w, "# HELP anp2_tlog_checkpoint_size Tree size of the latest signed checkpoint.\n# TYPE anp2_tlog_checkpoint_size gauge\nanp2_tlog_checkpoint_size %d\n", cp.Size)
	fmt.Fprintf(w, "# HELP anp2_tlog_witness_alarms_total Checkpoints submitted to this witness that do not extend the one it verified.\n# TYPE anp2_tlog_witness_alarms_total counter\nanp2_tlog_witness_alarms_total %d\n", m.witness.alarms.Load())
	fmt.Fprintf(w, "# HELP anp2_tlog_witnessed_size Entries of the latest checkpoint this witness verified, by log.\n# TYPE anp2_tlog_witnessed_size gauge\n")
	m.witness.mu.Lock()
	for origin, l := range m.witness.state.Logs {
		fmt.Fprintf(w, "anp2_tlog_witnessed_size{origin=\"%s\"} %d\n", labelEscaper.Replace(origin), l.Size)
	}
	m.witness.mu.Unlock()
	fmt.Fprintf(w, "# HELP anp2_tlog_stalled 1 when the tree stopped following the log.\n# TYPE anp2_tlog_stalled gauge\nanp2_tlog_stalled %d\n", stalled)
}
