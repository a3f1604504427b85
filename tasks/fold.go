package tasks

import (
	"encoding/hex"
	"sort"
	"strings"
	"sync"

	"github.com/anp2net/relay/protocol"
)

// Fold is the task view: every kind 50–55 event folded into per-task state.
// It is safe for one writer and many concurrent readers.
type Fold struct {
	mu     sync.RWMutex
	weight WeightFunc
	tasks  map[[32]byte]*task
	order  []*task // tasks with a valid request, by the request's (created_at, id)
	credit []*task // tasks whose request ever paid anp2_credit
	// creditLog lists changes to credit tasks by generation; an entry is
	// current when its gen equals its task's gen. Compacted as it grows.
	creditLog []logEntry
	agents    map[string]uint32
	names     []string
	gen       uint64
}

// New returns an empty Fold. w is the weight function Digest uses (nil: every
// agent weighs 1); Task, List and the credit queries take theirs per call.
func New(w WeightFunc) *Fold {
	return &Fold{weight: w, tasks: map[[32]byte]*task{}, agents: map[string]uint32{}}
}

// Add folds an accepted event in. Events arrive in any order (a kind 51 may
// arrive before its kind 50); adding an id already present changes nothing.
// Kinds other than 50–55 and kinds 51–55 without a root tag are ignored.
func (f *Fold) Add(ev *protocol.Event) {
	key, r, ok := f.prepare(ev)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r.agent = f.intern(ev.AgentID)
	t := f.tasks[key]
	if t == nil {
		t = &task{id: key}
		f.tasks[key] = t
	}
	if ev.Kind == protocol.KindTaskRequest {
		if t.req != nil {
			return
		}
		t.req = r
		if r.valid {
			t.request = r.parsed.(*protocol.TaskRequest)
			f.order = insertTask(f.order, t)
			if t.request.Reward.PaymentMethod == protocol.PaymentANP2Credit && !t.inCredit {
				t.inCredit = true
				f.credit = append(f.credit, t)
			}
		}
	} else if !t.insert(r) {
		return
	}
	f.touch(t)
}

// Remove withdraws a previously added event (its author revoked it with
// kind 9). Removing an event that is not in the fold changes nothing.
func (f *Fold) Remove(ev *protocol.Event) {
	key, r, ok := f.prepare(ev)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tasks[key]
	if t == nil {
		return
	}
	if ev.Kind == protocol.KindTaskRequest {
		if t.req == nil || t.req.id != r.id {
			return
		}
		if t.request != nil {
			f.order = removeTask(f.order, t)
		}
		t.req, t.request = nil, nil
	} else if !t.remove(r) {
		return
	}
	f.touch(t)
}

// prepare parses ev outside the lock and returns its task key and record.
func (f *Fold) prepare(ev *protocol.Event) ([32]byte, *rec, bool) {
	var key [32]byte
	if ev.Kind < protocol.KindTaskRequest || ev.Kind > protocol.KindTaskCancel {
		return key, nil, false
	}
	id, ok := ev.IDBytes()
	if !ok {
		return key, nil, false
	}
	r := newRec(ev, id)
	if ev.Kind == protocol.KindTaskRequest {
		return id, r, true
	}
	root := protocol.TaskRoot(ev)
	if _, err := hex.Decode(key[:], []byte(root)); err != nil || root == "" {
		return key, nil, false
	}
	return key, r, true
}

type logEntry struct {
	gen uint64
	t   *task
}

func (f *Fold) touch(t *task) {
	f.gen++
	t.gen = f.gen
	t.cache.Store(nil)
	if !t.inCredit {
		return
	}
	f.creditLog = append(f.creditLog, logEntry{f.gen, t})
	if len(f.creditLog) > 2*len(f.credit)+1024 {
		log := make([]logEntry, 0, len(f.credit))
		for _, ct := range f.credit {
			log = append(log, logEntry{ct.gen, ct})
		}
		sort.Slice(log, func(i, j int) bool { return log[i].gen < log[j].gen })
		f.creditLog = log
	}
}

func (f *Fold) intern(agent string) uint32 {
	if n, ok := f.agents[agent]; ok {
		return n
	}
	n := uint32(len(f.names))
	agent = strings.Clone(agent) // not the parsed event's bytes
	f.agents[agent] = n
	f.names = append(f.names, agent)
	return n
}

// lookup returns the visible task with hex id, or nil.
func (f *Fold) lookup(id string) *task {
	var key [32]byte
	if len(id) != 64 {
		return nil
	}
	if _, err := hex.Decode(key[:], []byte(id)); err != nil {
		return nil
	}
	t := f.tasks[key]
	if t == nil || t.request == nil {
		return nil
	}
	return t
}

// Len returns the number of tasks (valid kind 50 requests) in the fold.
func (f *Fold) Len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.order)
}

func taskLess(a, b *task) bool { return recLess(a.req, b.req) }

func insertTask(s []*task, t *task) []*task {
	i := sort.Search(len(s), func(i int) bool { return !taskLess(s[i], t) })
	s = append(s, nil)
	copy(s[i+1:], s[i:])
	s[i] = t
	return s
}

func removeTask(s []*task, t *task) []*task {
	i := sort.Search(len(s), func(i int) bool { return !taskLess(s[i], t) })
	if i < len(s) && s[i] == t {
		s = append(s[:i], s[i+1:]...)
	}
	return s
}
