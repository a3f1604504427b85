package a2a

import "sync"

// store holds the A2A-originated tasks in memory, at most max of them; the
// oldest is evicted first (FIFO, §19.4). It lives as long as the process.
type store struct {
	mu    sync.Mutex
	max   int
	tasks map[string]Task
	ring  []string // insertion order; ring[head] is the oldest when full
	head  int
}

func newStore(max int) *store {
	return &store{max: max, tasks: make(map[string]Task, max), ring: make([]string, 0, max)}
}

// put stores t, evicting the oldest task when the store is full.
func (s *store) put(t Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tasks[t.ID]; ok {
		s.tasks[t.ID] = t
		return
	}
	if len(s.ring) < s.max {
		s.ring = append(s.ring, t.ID)
	} else {
		delete(s.tasks, s.ring[s.head])
		s.ring[s.head] = t.ID
		s.head = (s.head + 1) % s.max
	}
	s.tasks[t.ID] = t
}

// get returns the task with id, or false.
func (s *store) get(id string) (Task, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	return t, ok
}

// len returns how many tasks are held.
func (s *store) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tasks)
}
