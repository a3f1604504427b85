package reconcile

// Session is the client side of one reconciliation with a server. It is not
// safe for concurrent use; the Index it reads may change meanwhile, in which
// case items added during the session may or may not be reported.
type Session struct {
	p    Params
	idx  *Index
	seen map[[32]byte]struct{} // ids already reported as have or need
	have [][32]byte
	need [][32]byte
}

// NewSession returns a client session over idx with the default Params.
func NewSession(idx *Index) *Session { return Params{}.NewSession(idx) }

// NewSession returns a client session over idx.
func (p Params) NewSession(idx *Index) *Session {
	return &Session{p: p.withDefaults(), idx: idx, seen: make(map[[32]byte]struct{})}
}

// Initiate returns the first message: fingerprints of up to
// Params.InitialBuckets equal-count ranges covering the client's set (each
// of at most IDListMax items where that takes no more ranges), or an empty
// id list when the set is empty.
func (s *Session) Initiate() []byte {
	st := newStep(s.p, s.idx, s)
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	n := s.idx.n
	if n == 0 {
		st.writeIDs(0, 0, Infinity)
		return st.w.buf
	}
	st.fingerprints(0, n, Infinity, min(s.p.InitialBuckets, (n+s.p.IDListMax-1)/s.p.IDListMax))
	return st.w.buf
}

// Reconcile takes the server's reply to the previous message and returns
// the next message to send, nil when reconciliation is complete. have holds
// ids the client has and the server lacks, need ids the server has and the
// client lacks, each learned in this step; across a session no id is
// reported twice. It returns a *protocol.Error with code CodeBadMessage or
// CodeUnsupportedVersion if the reply is malformed, leaving the session as
// it was.
func (s *Session) Reconcile(reply []byte) (next []byte, have, need [][32]byte, err error) {
	if err := validate(reply); err != nil {
		return nil, nil, nil, err
	}
	st := newStep(s.p, s.idx, s)
	s.have, s.need = nil, nil
	st.run(reply)
	have, need = s.have, s.need
	s.have, s.need = nil, nil
	if len(st.w.buf) == 1 {
		return nil, have, need, nil
	}
	return st.w.buf, have, need, nil
}

// validate checks a whole message without allocating.
func validate(msg []byte) error {
	r, err := newReader(msg)
	if err != nil {
		return err
	}
	for r.more() {
		if _, err := r.next(); err != nil {
			return err
		}
	}
	return nil
}

// compare takes the server's id list for the items at positions [lo, hi)
// and reports the differences, in list order then item order. Its memory
// is bounded by the list, not by the range. x.mu must be held.
func (s *Session) compare(x *Index, lo, hi int, rg *rawRange) {
	theirs := make(map[[32]byte]bool, rg.count()) // id -> we hold it too
	for i := range rg.count() {
		theirs[rg.id(i)] = false
	}
	x.each(lo, hi, func(it *Item) {
		if _, ok := theirs[it.ID]; ok {
			theirs[it.ID] = true
		} else {
			s.report(&s.have, it.ID)
		}
	})
	for i := range rg.count() {
		if id := rg.id(i); !theirs[id] {
			s.report(&s.need, id)
		}
	}
}

func (s *Session) report(list *[][32]byte, id [32]byte) {
	if _, dup := s.seen[id]; dup {
		return
	}
	s.seen[id] = struct{}{}
	*list = append(*list, id)
}
