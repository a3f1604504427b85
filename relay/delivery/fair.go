package delivery

import (
	"net/url"
	"strings"
	"sync"
)

// admission is fair's answer to a delivery that asks for a worker.
type admission int

const (
	admitted admission = iota
	// busy: its owner or its target host already has its share of the
	// workers; it stays due and is taken later.
	busy
	// broken: its target host's circuit breaker is open; it is not due
	// again before the breaker half-opens.
	broken
)

// outcome is what a finished (or abandoned) attempt tells fair.
type outcome int

const (
	notSent outcome = iota // no attempt was made (a claim rolled back)
	sentOK
	sentFailed
)

// fair shares the workers between owners and target hosts (SPEC §20.2):
// an owner has at most perOwner attempts in flight and a target host at
// most perHost, and a host whose attempts keep failing is cut off by a
// circuit breaker for a cooldown that doubles while it keeps failing.
// It is in memory: a restart starts every breaker closed. mu guards the
// maps; each admitted attempt is released exactly once.
type fair struct {
	mu                sync.Mutex
	perOwner, perHost int
	// failAfter consecutive failed attempts open a host's breaker for
	// cooldown ms at first, doubling at each reopening up to maxCooldown.
	failAfter             int
	cooldown, maxCooldown int64
	owners                map[string]int
	hosts                 map[string]*hostState
}

// hostState is a target host's attempts in flight and its breaker. An
// entry exists only while the host has attempts in flight, failures or
// an open breaker, so the map holds at most one entry per failing host.
type hostState struct {
	inflight int
	fails    int   // consecutive failed attempts
	until    int64 // the breaker is open before this relay time (ms); 0: closed
	cooldown int64 // the length of the last opening, ms
	probing  bool  // half-open: the one trial attempt is in flight
}

func newFair(perOwner, perHost, failAfter int, cooldown, maxCooldown int64) *fair {
	return &fair{perOwner: perOwner, perHost: perHost, failAfter: failAfter, cooldown: cooldown,
		maxCooldown: maxCooldown, owners: map[string]int{}, hosts: map[string]*hostState{}}
}

// acquire asks for a worker for an attempt of owner's delivery to host
// at relay time now (ms). When admitted, the caller must release it once.
// broken comes with the time the breaker half-opens.
func (f *fair) acquire(owner, host string, now int64) admission {
	a, _ := f.admit(owner, host, now)
	return a
}

// admit is acquire, with the time a broken host half-opens.
func (f *fair) admit(owner, host string, now int64) (admission, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.hosts[host]
	if h != nil && h.until != 0 {
		if now < h.until {
			return broken, h.until
		}
		// Half-open: one trial attempt at a time.
		if h.probing || h.inflight > 0 {
			return busy, 0
		}
	}
	if f.owners[owner] >= f.perOwner || (h != nil && h.inflight >= f.perHost) {
		return busy, 0
	}
	if h == nil {
		h = &hostState{}
		f.hosts[host] = h
	}
	if h.until != 0 {
		h.probing = true
	}
	h.inflight++
	f.owners[owner]++
	return admitted, 0
}

// room is how many more attempts owner may have in flight.
func (f *fair) room(owner string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.perOwner - f.owners[owner]
}

// release ends an admitted attempt with its outcome.
func (f *fair) release(owner, host string, o outcome, now int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owners[owner]--; f.owners[owner] <= 0 {
		delete(f.owners, owner)
	}
	h := f.hosts[host]
	if h == nil {
		return
	}
	h.inflight--
	switch o {
	case sentOK:
		h.fails, h.until, h.cooldown, h.probing = 0, 0, 0, false
	case sentFailed:
		h.fails++
		if h.probing || h.fails >= f.failAfter {
			h.cooldown = min(max(2*h.cooldown, f.cooldown), f.maxCooldown)
			h.until, h.fails, h.probing = now+h.cooldown, 0, false
		}
	default:
		h.probing = false
	}
	if h.inflight <= 0 && h.fails == 0 && h.until == 0 {
		delete(f.hosts, host)
	}
}

// targetHost is the host (with port) of a target URL, lowercased: the
// key of the per-host share and breaker.
func targetHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return strings.ToLower(u.Host)
}
