package relay

import (
	"math"
	"sync"
	"time"
)

// Limiter is a GCRA rate limiter: at most n events per window per key, with
// bursts up to n. Its memory is bounded by sweeping idle keys.
type Limiter struct {
	n      int
	window time.Duration
	mu     sync.Mutex
	tat    map[string]time.Time // theoretical arrival time per key
	swept  time.Time
	shared SharedRates
}

// SharedRates keeps a limiter's GCRA state where every relay process over
// one log sees it (relay/postgres), so a limit holds across processes.
// Take is Limiter's rule on the shared state: with take, it charges
// interval to key when the new theoretical arrival time stays within
// window of now; it reports whether it fits and, if not, how long to
// wait. An error makes the limiter fall back to its own state.
type SharedRates interface {
	Take(key string, now time.Time, interval, window time.Duration, take bool) (bool, time.Duration, error)
}

// NewLimiter returns a limiter of n units per window per key (n ≤ 0: no
// limit).
func NewLimiter(n int, window time.Duration) *Limiter {
	return &Limiter{n: n, window: window, tat: map[string]time.Time{}}
}

// allow charges one event to key at now when take is true; it reports
// whether the event is within the limit and, if not, how long to wait.
func (l *Limiter) allow(key string, now time.Time, take bool) (bool, time.Duration) {
	return l.take(key, now, 1, take)
}

// AllowN charges n units at once (a batch); the answer is in whole seconds
// to wait.
func (l *Limiter) AllowN(key string, now time.Time, n int) (bool, int) {
	ok, wait := l.take(key, now, n, true)
	return ok, int(wait.Seconds()) + 1
}

func (l *Limiter) take(key string, now time.Time, units int, take bool) (bool, time.Duration) {
	if l == nil || l.n <= 0 {
		return true, 0
	}
	interval := l.window / time.Duration(l.n) * time.Duration(units)
	if l.shared != nil {
		if ok, wait, err := l.shared.Take(key, now, interval, l.window, take); err == nil {
			return ok, wait
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	tat := l.tat[key]
	if tat.Before(now) {
		tat = now
	}
	// Allowed when the new TAT stays within one window of now.
	next := tat.Add(interval)
	if next.Sub(now) > l.window {
		return false, next.Sub(now) - l.window
	}
	if take {
		l.tat[key] = next
	}
	return true, 0
}

func (l *Limiter) sweep(now time.Time) {
	if now.Sub(l.swept) < l.window {
		return
	}
	l.swept = now
	for k, t := range l.tat {
		if t.Before(now) {
			delete(l.tat, k)
		}
	}
}

func retrySeconds(d time.Duration) int {
	return int(math.Max(1, math.Ceil(d.Seconds())))
}
