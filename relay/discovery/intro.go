package discovery

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"log/slog"
	"sync"
	"unicode/utf8"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
)

// Introduction beacons (seed §12.6 step 2: "Auto-emit a low-priority
// introduction beacon (kind 15) to neighbor AIs"). When an agent's first
// profile is committed, the relay publishes, signed with its own key, one
// kind 15 that names the agent and its nearest neighbours, unless the
// profile opts out with "intro_beacon": false.
const (
	// IntroIntent is the intent of an introduction beacon.
	IntroIntent = "introduce"
	// IntroTopic is its topic tag.
	IntroTopic = "introductions"
	// IntroTTL is its lifetime: the seed's first-day window.
	IntroTTL = 86400
	// IntroPerMinute bounds the introductions one relay publishes a
	// minute; past it, new agents go unintroduced (their answer still
	// lists their neighbours, §18.10).
	IntroPerMinute = 60
	// introQueue bounds the profiles waiting for their introduction.
	introQueue = 1024
	// introNeighbors is how many neighbours a beacon names.
	introNeighbors = 10
	// introMaxAge: a profile created longer ago (mirrored history) is not
	// introduced.
	introMaxAge = 86400
	// introNameMax bounds the profile name quoted in the beacon, in bytes.
	introNameMax = 64
)

// introItem is one profile waiting for its introduction: small and
// bounded, never the event itself.
type introItem struct {
	agent, profile, name string
}

// Intro is the module that publishes introduction beacons. It reads the
// discovery fold of d for first profiles, discoverability and neighbours.
type Intro struct {
	d     *Module
	core  *relay.Server
	queue chan introItem

	mu     sync.Mutex
	minute int64
	sent   int
}

var _ relay.Runner = (*Intro)(nil)

// NewIntro returns the introduction module over discovery module d (which
// must be mounted too).
func NewIntro(d *Module) *Intro { return &Intro{d: d, queue: make(chan introItem, introQueue)} }

// Name is "intro".
func (i *Intro) Name() string { return "intro" }

// Mount registers the publish hook that queues first profiles.
func (i *Intro) Mount(core *relay.Server) error {
	i.core = core
	core.AddPublishInfo(i.onPublish)
	return nil
}

// Run publishes the queued introductions until ctx ends.
func (i *Intro) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-i.queue:
			if err := i.introduce(ctx, it); err != nil {
				slog.Warn("introduction beacon", "agent", it.agent, "err", err)
			}
		}
	}
}

// onPublish queues a first profile published here directly (POST /events,
// stored anew) that is fresh, public and does not opt out: the relay the
// agent registered with introduces it; a profile that arrives by
// mirroring, gossip or batch is left to the relay it was published to. It
// runs before the publisher is answered, so it never blocks: a full queue
// drops the introduction. It adds no field to the answer.
func (i *Intro) onPublish(e *protocol.Event) map[string]any {
	key := i.core.Config().RelayKey
	if len(key) != ed25519.PrivateKeySize || e.Kind != protocol.KindProfile ||
		i.core.Now()-e.CreatedAt > introMaxAge || !i.d.fold.FirstProfile(e) {
		return nil
	}
	var p struct {
		Name        any   `json:"name"`
		IntroBeacon *bool `json:"intro_beacon"`
	}
	if json.Unmarshal([]byte(e.Content), &p) == nil && p.IntroBeacon != nil && !*p.IntroBeacon {
		return nil
	}
	if i.d.private(e.AgentID, "") || e.AgentID == protocol.AgentIDOf(key) {
		return nil
	}
	name, _ := p.Name.(string)
	select {
	case i.queue <- introItem{agent: e.AgentID, profile: e.ID, name: clip(name, introNameMax)}:
	default:
	}
	return nil
}

// introduce publishes the introduction of it.agent: once per agent (a
// beacon by this relay already naming the agent ends it), and within
// IntroPerMinute.
func (i *Intro) introduce(ctx context.Context, it introItem) error {
	key := i.core.Config().RelayKey
	self := protocol.AgentIDOf(key)
	done, err := i.core.Log().Query(ctx, eventlog.Filter{Kinds: []int64{protocol.KindBeacon}, Authors: []string{self},
		Tags: map[string][]string{"p": {it.agent}}, Limit: 1})
	if err != nil || len(done) > 0 {
		return err
	}
	if !i.allow(i.core.Now()) {
		return nil
	}
	who := it.agent[:12]
	if it.name != "" {
		who = it.name + " (" + who + ")"
	}
	content, _ := json.Marshal(map[string]any{"intent": IntroIntent, "about": "new agent " + who + " joined; say hello",
		"ttl_sec": IntroTTL, "urgency": "low"})
	tags := [][]string{{"t", IntroTopic}, {"p", it.agent}, {"e", it.profile}}
	for _, n := range i.d.fold.Neighbors(it.agent, introNeighbors) {
		if n.AgentID != it.agent && n.AgentID != self {
			tags = append(tags, []string{"p", n.AgentID})
		}
	}
	e := &protocol.Event{CreatedAt: i.core.Now(), Kind: protocol.KindBeacon, Tags: tags, Content: string(content)}
	e.Sign(key)
	_, rejected, err := i.core.IngestMirrored(ctx, []*protocol.Event{e})
	if err == nil && rejected > 0 {
		slog.Warn("introduction beacon refused by the log", "agent", it.agent)
	}
	return err
}

// allow takes one of the minute's IntroPerMinute introductions.
func (i *Intro) allow(now int64) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if m := now / 60; m != i.minute {
		i.minute, i.sent = m, 0
	}
	if i.sent >= IntroPerMinute {
		return false
	}
	i.sent++
	return true
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
