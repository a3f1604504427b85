package branches

// HoldRebuild takes the rebuild lock as a rebuild in progress holds it,
// until release is called (tests: readers must not wait for it).
func (m *Module) HoldRebuild() (release func()) {
	m.live.buildMu.Lock()
	return m.live.buildMu.Unlock
}
