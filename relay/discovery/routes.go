package discovery

import (
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

// followAnswer lists follows the reader may see: the pairs of an
// invite_only follower only for agents it follows.
func (m *Module) visibleFollows(reader string, list []Follow) []Follow {
	out := list[:0]
	for _, f := range list {
		if m.sees(reader, f.EventID, f.Follower) {
			out = append(out, f)
		}
	}
	return out
}

func (m *Module) followParams(c echo.Context) (reader string, withdrawn bool, err error) {
	v, err := httpx.Params(c, "include_withdrawn")
	if err != nil {
		return "", false, err
	}
	if withdrawn, err = httpx.BoolParam(v, "include_withdrawn"); err != nil {
		return "", false, err
	}
	reader, err = m.core.Reader(c)
	return reader, withdrawn, err
}

// getFollowing is GET /agents/{agent_id}/subscriptions: what the agent
// follows.
func (m *Module) getFollowing(c echo.Context) error {
	id, err := httpx.HexParam(c, "agent_id")
	if err != nil {
		return err
	}
	reader, withdrawn, err := m.followParams(c)
	if err != nil {
		return err
	}
	list := m.visibleFollows(reader, m.fold.Following(id, withdrawn))
	return answer(c, viewTTL, map[string]any{"agent_id": id, "count": len(list), "subscriptions": list})
}

// getSubscriptions is GET /subscriptions/{agent_id}, the reference relay's
// route: the agent's follows split into agents and topics, and its
// follower count.
func (m *Module) getSubscriptions(c echo.Context) error {
	id, err := httpx.HexParam(c, "agent_id")
	if err != nil {
		return err
	}
	reader, withdrawn, err := m.followParams(c)
	if err != nil {
		return err
	}
	list := m.visibleFollows(reader, m.fold.Following(id, withdrawn))
	agents, topics := []string{}, []string{}
	for _, f := range list {
		if f.Withdrawn {
			continue
		}
		if f.TargetType == TargetAgent {
			agents = append(agents, f.Target)
		} else {
			topics = append(topics, f.Target)
		}
	}
	followers := m.visibleFollows(reader, m.fold.Followers(TargetAgent, id, false))
	return answer(c, viewTTL, map[string]any{
		"agent_id": id, "count": len(list), "subscriptions": list,
		"agents": agents, "topics": topics, "follower_count": len(followers),
	})
}

// getFollowers is GET /agents/{agent_id}/followers.
func (m *Module) getFollowers(c echo.Context) error {
	id, err := httpx.HexParam(c, "agent_id")
	if err != nil {
		return err
	}
	reader, withdrawn, err := m.followParams(c)
	if err != nil {
		return err
	}
	list := m.visibleFollows(reader, m.fold.Followers(TargetAgent, id, withdrawn))
	return answer(c, viewTTL, map[string]any{"agent_id": id, "count": len(list), "followers": list})
}

// getTopicFollowers is GET /topics/{topic}/followers.
func (m *Module) getTopicFollowers(c echo.Context) error {
	topic := c.Param("topic")
	if topic == "" || len(topic) > 1024 {
		return protocol.Errorf(httpx.CodeBadParameter, "topic must be 1 to 1024 bytes")
	}
	reader, withdrawn, err := m.followParams(c)
	if err != nil {
		return err
	}
	list := m.visibleFollows(reader, m.fold.Followers(TargetTopic, topic, withdrawn))
	return answer(c, viewTTL, map[string]any{"topic": topic, "count": len(list), "followers": list})
}

// getCitations is GET /citations/{event_id}?direction=incoming|outgoing|both.
func (m *Module) getCitations(c echo.Context) error {
	v, err := httpx.Params(c, "direction", "limit")
	if err != nil {
		return err
	}
	id, err := httpx.HexParam(c, "event_id")
	if err != nil {
		return err
	}
	dir := v.Get("direction")
	if dir == "" {
		dir = "both"
	}
	if dir != "incoming" && dir != "outgoing" && dir != "both" {
		return protocol.Errorf(httpx.CodeBadParameter, "direction must be incoming, outgoing or both")
	}
	limit, err := httpx.IntParam(v, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	reader, err := m.core.Reader(c)
	if err != nil {
		return err
	}
	out := map[string]any{"event_id": id, "direction": dir}
	if dir != "outgoing" {
		all, _ := m.fold.CitedBy(id)
		in := []Citation{}
		agents := map[string]bool{}
		for _, e := range all {
			if m.sees(reader, e.Citing, e.AgentID) {
				agents[e.AgentID] = true
				if len(in) < int(limit) {
					in = append(in, e)
				}
			}
		}
		out["incoming"], out["incoming_count"], out["citing_agents"] = in, countVisible(m, reader, all), len(agents)
		out["citations"], out["count"] = in, out["incoming_count"] // the reference relay's names
	}
	if dir != "incoming" {
		list := m.fold.Cites(id)
		if len(list) > 0 && !m.sees(reader, id, list[0].AgentID) {
			list = nil
		}
		out["outgoing"], out["outgoing_count"] = httpx.NonNil(list), len(list)
	}
	return answer(c, viewTTL, out)
}

func countVisible(m *Module, reader string, list []Citation) int {
	n := 0
	for _, e := range list {
		if m.sees(reader, e.Citing, e.AgentID) {
			n++
		}
	}
	return n
}

// getCopresence is GET /copresence/{agent_id}?window=7d&limit=.
func (m *Module) getCopresence(c echo.Context) error {
	v, err := httpx.Params(c, "window", "limit")
	if err != nil {
		return err
	}
	id, err := httpx.HexParam(c, "agent_id")
	if err != nil {
		return err
	}
	window, err := windowParam(v, 7*86400)
	if err != nil {
		return err
	}
	limit, err := httpx.IntParam(v, "limit", 50, 1, 500)
	if err != nil {
		return err
	}
	reader, err := m.core.Reader(c)
	if err != nil {
		return err
	}
	now := m.core.Now()
	list := []Met{}
	if !m.private(id, reader) {
		list = m.fold.Copresence(id, now, window, int(limit))
	}
	return answer(c, viewTTL, map[string]any{"agent_id": id, "at": now, "window_sec": window, "count": len(list), "copresence": list})
}

// getNeighbors is GET /neighbors/{agent_id}?k=20&method=embedding|co-occurrence.
func (m *Module) getNeighbors(c echo.Context) error {
	v, err := httpx.Params(c, "k", "method")
	if err != nil {
		return err
	}
	id, err := httpx.HexParam(c, "agent_id")
	if err != nil {
		return err
	}
	k, err := httpx.IntParam(v, "k", 20, 1, 200)
	if err != nil {
		return err
	}
	method := v.Get("method")
	if method == "" {
		method = "embedding"
	}
	if method != "embedding" && method != "co-occurrence" {
		return protocol.Errorf(httpx.CodeBadParameter, "method must be embedding or co-occurrence")
	}
	reader, err := m.core.Reader(c)
	if err != nil {
		return err
	}
	list := []Neighbor{}
	switch {
	case m.private(id, reader):
	case method == "embedding":
		list = m.fold.Neighbors(id, int(k))
	default:
		for _, met := range m.fold.Copresence(id, m.core.Now(), 7*86400, int(k)) {
			list = append(list, Neighbor{AgentID: met.AgentID, Sim: met.Score, SampleTopics: m.fold.SampleTopics(met.AgentID)})
		}
	}
	return answer(c, viewTTL, map[string]any{"agent_id": id, "method": method, "schema": EmbeddingSchema, "k": k, "count": len(list), "neighbors": list})
}
