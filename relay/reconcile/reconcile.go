package reconcile

// Params are the splitting and size choices of one side. They affect
// efficiency, never correctness: the two sides need not agree on them. The
// zero value means the defaults; out-of-range values are clamped.
type Params struct {
	// InitialBuckets is the most ranges the client's first message splits
	// its set into (default 32, at most 64).
	InitialBuckets int
	// Buckets is how many ranges a side splits a range into when
	// fingerprints differ (default 16, 2 to 64).
	Buckets int
	// IDListMax: a differing range where this side holds at most this many
	// items is answered with the ids rather than split (default 32, 1 to
	// 1024).
	IDListMax int
	// FrameLimit caps the size in bytes of every message this side builds
	// (default 512 KiB, 8 KiB to MaxMessageSize). Work that does not fit is
	// deferred to later rounds.
	FrameLimit int
}

// Defaults, see Params.
const (
	DefaultInitialBuckets = 32
	DefaultBuckets        = 16
	DefaultIDListMax      = 32
	DefaultFrameLimit     = 512 << 10
	minFrameLimit         = 8 << 10
)

// reserve is room kept at the end of every frame for a closing fingerprint
// over the rest of the set: a pending skip (bound and mode) plus the
// infinity bound, mode and fingerprint.
const reserve = (maxBoundLen + 1) + (2 + 1 + fingerprintSz)

func (p Params) withDefaults() Params {
	p.InitialBuckets = clampOr(p.InitialBuckets, DefaultInitialBuckets, 1, 64)
	p.Buckets = clampOr(p.Buckets, DefaultBuckets, 2, 64)
	p.IDListMax = clampOr(p.IDListMax, DefaultIDListMax, 1, 1024)
	p.FrameLimit = clampOr(p.FrameLimit, DefaultFrameLimit, minFrameLimit, MaxMessageSize)
	return p
}

func clampOr(v, def, lo, hi int) int {
	if v == 0 {
		return def
	}
	return min(max(v, lo), hi)
}

// Respond answers a client message with the default Params. See
// Params.Respond.
func Respond(idx *Index, msg []byte) ([]byte, error) {
	return Params{}.Respond(idx, msg)
}

// Respond answers one client message against idx. The server keeps no
// state: the message says everything. For each range of the message it
// skips what matches, answers a differing fingerprint with its ids (small
// ranges) or finer fingerprints, and answers an id list with its own ids.
//
// A message whose version byte is another protocol version (0x60-0x6f) gets
// the one-byte reply Version, as Negentropy V1 asks. Otherwise it returns a
// *protocol.Error with code CodeBadMessage if msg is malformed.
func (p Params) Respond(idx *Index, msg []byte) ([]byte, error) {
	if len(msg) > 0 && msg[0] != Version && isVersionByte(msg[0]) {
		return []byte{Version}, nil
	}
	if err := validate(msg); err != nil {
		return nil, err
	}
	s := newStep(p.withDefaults(), idx, nil)
	s.run(msg)
	return s.w.buf, nil
}

// step builds one outgoing message from one incoming message. The server's
// and the client's rules differ only in what an incoming id list means.
type step struct {
	p   Params
	idx *Index
	w   *writer
	// lower is where the next incoming range starts. Output has been
	// written up to emitted; [emitted, lower) is a pending skip.
	lower, emitted Bound
	// client is set for the client side, which compares incoming id lists;
	// the server answers them with its own.
	client *Session
}

func newStep(p Params, idx *Index, client *Session) *step {
	return &step{p: p, idx: idx, w: newWriter(), client: client}
}

// run handles every range of msg, which must be valid, stopping early when
// the frame is full and closing with a fingerprint over whatever was not
// handled.
func (s *step) run(msg []byte) {
	r, _ := newReader(msg)
	for r.more() {
		rg, _ := r.next()
		mark, emitted, lower := s.w.mark(), s.emitted, s.lower
		s.idx.mu.RLock()
		full := s.handle(&rg)
		s.idx.mu.RUnlock()
		if full {
			return
		}
		if len(s.w.buf) > s.p.FrameLimit-reserve {
			s.w.reset(mark)
			s.emitted, s.lower = emitted, lower
			s.closeFrame()
			return
		}
		s.lower = rg.upper
	}
}

// handle writes the answer to one incoming range [s.lower, rg.upper). It
// reports true when it filled the frame and closed it.
func (s *step) handle(rg *rawRange) bool {
	switch rg.mode {
	case ModeFingerprint:
		lo, hi := s.idx.span(s.lower, rg.upper)
		if s.idx.fingerprint(lo, hi) == rg.fp {
			return false
		}
		return s.split(lo, hi, rg.upper, s.p.Buckets)
	case ModeIDList:
		if s.client != nil {
			lo, hi := s.idx.span(s.lower, rg.upper)
			s.client.compare(s.idx, lo, hi, rg)
			return false
		}
		lo, hi := s.idx.span(s.lower, rg.upper)
		return s.idList(lo, hi, rg.upper)
	}
	return false // ModeSkip
}

// split describes the items at positions [lo, hi), which end at upper: their
// ids when few, otherwise fingerprints.
func (s *step) split(lo, hi int, upper Bound, buckets int) bool {
	if hi-lo <= s.p.IDListMax {
		return s.idList(lo, hi, upper)
	}
	s.fingerprints(lo, hi, upper, buckets)
	return false
}

// fingerprints writes up to buckets fingerprints of equal-count ranges that
// together cover the items at positions [lo, hi), which end at upper. Each
// inner boundary is the shortest bound between two adjacent items.
func (s *step) fingerprints(lo, hi int, upper Bound, buckets int) {
	s.flushSkip()
	n := hi - lo
	buckets = max(min(buckets, n), 1)
	prevSum, prevPos := s.idx.prefixSum(lo), lo
	for i := 1; i <= buckets; i++ {
		pos := lo + n*i/buckets
		sum := s.idx.prefixSum(pos)
		b := upper
		if i < buckets {
			b = minimalBound(s.idx.at(pos-1), s.idx.at(pos))
		}
		d := sum
		d.sub(&prevSum)
		s.w.fingerprint(b, d.fingerprint(pos-prevPos))
		prevSum, prevPos = sum, pos
	}
	s.emitted = upper
}

// idList writes the ids at positions [lo, hi), which end at upper. If they
// do not all fit in the frame it writes as many as fit, ending the range
// just after the last, closes the frame with a fingerprint over the rest and
// reports true.
func (s *step) idList(lo, hi int, upper Bound) bool {
	s.flushSkip()
	room := s.p.FrameLimit - reserve - len(s.w.buf) - (maxBoundLen + 1 + maxVarintLen)
	fit := max(room/idSize, 0)
	if hi-lo <= fit {
		s.writeIDs(lo, hi, upper)
		return false
	}
	if fit > 0 {
		cut := lo + fit
		s.writeIDs(lo, cut, minimalBound(s.idx.at(cut-1), s.idx.at(cut)))
		lo = cut
	}
	s.closeFrameAt(lo)
	return true
}

func (s *step) writeIDs(lo, hi int, upper Bound) {
	s.w.idListHeader(upper, hi-lo)
	s.idx.each(lo, hi, func(it *Item) { s.w.buf = append(s.w.buf, it.ID[:]...) })
	s.emitted, s.lower = upper, upper
}

// flushSkip writes the pending skip, if any.
func (s *step) flushSkip() {
	if s.lower != s.emitted {
		s.w.skip(s.lower)
		s.emitted = s.lower
	}
}

// closeFrame ends the frame with one fingerprint over [s.lower, infinity),
// taking its own read lock.
func (s *step) closeFrame() {
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	s.closeFrameAt(s.idx.rank(s.lower))
}

// closeFrameAt ends the frame with one fingerprint over the items from
// position lo to the end, the range starting at s.lower. x.mu must be held.
func (s *step) closeFrameAt(lo int) {
	s.flushSkip()
	s.w.fingerprint(Infinity, s.idx.fingerprint(lo, s.idx.n))
	s.emitted, s.lower = Infinity, Infinity
}
