package delivery

// SetFeedMax sets how many committed events m's feed holds (call before
// the relay serves).
func SetFeedMax(m *Module, n int) {
	m.feed.mu.Lock()
	m.feed.max = n
	m.feed.mu.Unlock()
}

// FeedGap returns the highest sequence the feed lacks (the matcher reads
// the log up to it).
func FeedGap(m *Module) int64 {
	m.feed.mu.Lock()
	defer m.feed.mu.Unlock()
	return m.feed.gap
}
