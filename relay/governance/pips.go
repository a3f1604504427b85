package governance

import (
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
)

// pipSet holds the kind 20 proposals and the kind 2 replies of the
// discussion threads.
type pipSet struct {
	mu sync.Mutex
}

type pipDigest struct{}

func newPipSet() *pipSet                      { return &pipSet{} }
func (p *pipSet) add(e *protocol.Event)       {}
func (p *pipSet) remove(e *protocol.Event)    {}
func (p *pipSet) digest(at int64) []pipDigest { return []pipDigest{} }

func (m *Module) mountPIPs(core *relay.Server) {}
