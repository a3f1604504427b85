package delivery

import "testing"

// TestFairShares: an owner and a host get at most their shares of
// attempts in flight; a host's breaker opens after failAfter failures in
// a row, lets one trial through once the cooldown has passed, doubles
// the cooldown when the trial fails and closes when one succeeds; a
// closed, idle host leaves no entry behind.
func TestFairShares(t *testing.T) {
	f := newFair(2, 3, 2, 1000, 3000)
	want := func(owner, host string, now int64, a admission) {
		t.Helper()
		if got := f.acquire(owner, host, now); got != a {
			t.Fatalf("acquire(%s, %s, %d) = %d, want %d", owner, host, now, got, a)
		}
	}
	want("a", "h", 0, admitted)
	want("a", "h", 0, admitted)
	want("a", "g", 0, busy) // a's share is 2
	want("b", "h", 0, admitted)
	want("c", "h", 0, busy) // h's share is 3
	if f.room("a") != 0 || f.room("c") != 2 {
		t.Fatalf("rooms: a %d, c %d", f.room("a"), f.room("c"))
	}
	f.release("a", "h", sentFailed, 10)
	f.release("a", "h", sentFailed, 10) // two in a row: open until 1010
	if a, until := f.admit("c", "h", 500); a != broken || until != 1010 {
		t.Fatalf("admit while open: %d until %d", a, until)
	}
	want("c", "h", 1010, busy) // half-open, but b's attempt is still in flight
	f.release("b", "h", notSent, 1000)
	want("c", "h", 1010, admitted) // the one trial
	want("d", "h", 1010, busy)
	f.release("c", "h", sentFailed, 1100) // reopens for twice as long: until 3100
	want("c", "h", 3000, broken)
	want("c", "h", 3100, admitted)
	f.release("c", "h", sentOK, 3200)
	want("a", "h", 3200, admitted)
	want("b", "h", 3200, admitted)
	want("c", "h", 3200, admitted)
	for _, o := range []string{"a", "b", "c"} {
		f.release(o, "h", sentOK, 3300)
	}
	if len(f.hosts) != 0 || len(f.owners) != 0 {
		t.Fatalf("entries left: %v %v", f.hosts, f.owners)
	}
}

// TestRegexWork: a regex is charged its program size times the string's
// length before it runs; one that would overdraw the budget does not
// match and leaves the budget negative.
func TestRegexWork(t *testing.T) {
	s, err := ParseSpec([]byte(`{"match":{"kinds":[1]},"filter":[{"path":"$.s","operator":"regex","value":"b"}],"target":{"type":"webhook","url":"https://example.com/h"}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	ops := s.Filter[0].ops
	e := ev(`{"s":"aaab"}`)
	work := regexWork(ops, 4)
	if !s.matchOn(&docCache{e: e}, &work) || work != 0 {
		t.Fatalf("within budget: work left %d", work)
	}
	work = regexWork(ops, 4) - 1
	if s.matchOn(&docCache{e: e}, &work) || work >= 0 {
		t.Fatalf("over budget: matched, or work left %d", work)
	}
}
