package discovery

// RecentStubs is how many stubs the feed index holds (by author).
func (f *Fold) RecentStubs() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := 0
	for _, l := range f.recent.byAuthor {
		n += l.n
	}
	return n
}

// StorePath is the store's file ("" in memory).
func (f *Fold) StorePath() string { return f.st.path }

// SetStoreBounds sets the open transaction's and the undo journal's
// bounds (row changes) until the returned function restores them.
func SetStoreBounds(pending, undo int) (restore func()) {
	p, u := maxPendingWrites, maxUndoRows
	maxPendingWrites, maxUndoRows = pending, undo
	return func() { maxPendingWrites, maxUndoRows = p, u }
}

// StoreMode is the store's journal mode and whether it is in bulk mode.
func (f *Fold) StoreMode() (journal string, bulk bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st.flush()
	if err := f.st.tx.QueryRow(`PRAGMA journal_mode`).Scan(&journal); err != nil {
		return err.Error(), f.st.bulk
	}
	return journal, f.st.bulk
}

// FlushStore writes the store's buffered additions (no index is built).
func (f *Fold) FlushStore() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st.flush()
}
