package discovery_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestProfileWindow: a vector covers the 50 newest posts; removing a post
// inside the window brings the 51st back, and the result equals a fold
// that never saw the removed posts, whatever the order.
func TestProfileWindow(t *testing.T) {
	a := taskstest.Pool(3)
	const base = 1763800000
	var posts []*protocol.Event
	for i := range 60 {
		posts = append(posts, a[0].Sign(protocol.KindPost, base+int64(i), fmt.Sprintf("topic%d shared words here %d", i%7, i*i%13)))
	}
	others := []*protocol.Event{
		a[1].Sign(protocol.KindPost, base, "topic3 shared words"),
		a[1].Sign(protocol.KindPost, base+1, "topic5 here 4"),
		a[2].Sign(protocol.KindPost, base, "topic1 words 9"),
	}
	removed := map[int]bool{3: true, 55: true, 59: true} // two inside the window, one outside
	// oldest first pushes posts out of the window; newest first adds
	// past its end; clean never sees the removed posts.
	oldest, newest, clean := discovery.New(), discovery.New(), discovery.New()
	for i := range posts {
		oldest.Add(posts[i])
		newest.Add(posts[len(posts)-1-i])
		if !removed[i] {
			clean.Add(posts[i])
		}
	}
	for i := range removed {
		oldest.Remove(posts[i])
		newest.Remove(posts[i])
	}
	for _, e := range others {
		oldest.Add(e)
		newest.Add(e)
		clean.Add(e)
	}
	for _, x := range a {
		want := clean.Neighbors(x.ID, 5)
		for name, f := range map[string]*discovery.Fold{"oldest first": oldest, "newest first": newest} {
			if got := f.Neighbors(x.ID, 5); len(want) == 0 || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, %s: %+v, want %+v", x.Name, name, got, want)
			}
		}
	}
}
