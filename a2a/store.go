package a2a

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"
)

// SharedTasks keeps A2A-originated tasks where every relay process over
// one log reads them, so a task made by message/send on one process
// answers tasks/get, tasks/resubscribe and a follow-up message/send on
// every other (SPEC §9). The PostgreSQL log implements it; the module
// uses the log it is mounted on when the log does. body is the task's
// JSON; GetA2ATask reports false for an id it does not hold.
type SharedTasks interface {
	PutA2ATask(ctx context.Context, id string, body []byte) error
	GetA2ATask(ctx context.Context, id string) ([]byte, bool, error)
}

// Bounds of the shared store's traffic: a task larger than maxSharedTask
// stays in its process's memory only, and one read or write waits at most
// sharedTimeout (the answer goes on without it).
const (
	maxSharedTask = 256 << 10
	sharedTimeout = 2 * time.Second
)

// store holds the A2A-originated tasks in memory, at most max of them; the
// oldest is evicted first (FIFO, §19.4). It lives as long as the process.
// With a shared store it also writes each task there, and a task it does
// not hold is looked up there (then kept, since an A2A task is final when
// made).
type store struct {
	mu     sync.Mutex
	max    int
	tasks  map[string]Task
	ring   []string // insertion order; ring[head] is the oldest when full
	head   int
	shared SharedTasks // nil: this process only
	log    *slog.Logger
}

func newStore(max int) *store {
	return &store{max: max, tasks: make(map[string]Task, max), ring: make([]string, 0, max), log: slog.Default()}
}

// put stores t, evicting the oldest task when the store is full, and
// writes it to the shared store (a failure is logged: the task stays
// known to this process).
func (s *store) put(t Task) {
	s.keep(t)
	if s.shared == nil {
		return
	}
	body, err := json.Marshal(t)
	if err != nil || len(body) > maxSharedTask {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	if err := s.shared.PutA2ATask(ctx, t.ID, body); err != nil {
		s.log.Warn("a2a: shared task store write failed", "task", t.ID, "err", err)
	}
}

// keep stores t in memory.
func (s *store) keep(t Task) {
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

// get returns the task with id, or false. Only an id of the shape this
// relay gives A2A tasks (a UUID) is looked up in the shared store, so a
// native task id (64 hex) costs no database read.
func (s *store) get(id string) (Task, bool) {
	s.mu.Lock()
	t, ok := s.tasks[id]
	s.mu.Unlock()
	if ok || s.shared == nil || !isTaskUUID(id) {
		return t, ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	body, ok, err := s.shared.GetA2ATask(ctx, id)
	if err != nil {
		s.log.Warn("a2a: shared task store read failed", "task", id, "err", err)
		return Task{}, false
	}
	if !ok || json.Unmarshal(body, &t) != nil || t.ID != id {
		return Task{}, false
	}
	s.keep(t)
	return t, true
}

// isTaskUUID reports whether id has newID's shape: 36 characters,
// lowercase hex with dashes at 8, 13, 18 and 23.
func isTaskUUID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}
