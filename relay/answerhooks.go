package relay

import (
	"encoding/json"
	"net/http"

	"github.com/anp2net/relay/protocol"
	"github.com/labstack/echo/v4"
)

// AddPublishInfo registers a hook that may add fields to the answer of a
// direct publish (POST /events) that stored e anew: it returns the fields
// (nil for none). The answer's own fields (id, accepted, duplicate,
// stored) cannot be replaced. It must be called before the relay serves
// (from Mount).
func (s *Server) AddPublishInfo(hook func(e *protocol.Event) map[string]any) {
	s.publishInfo = append(s.publishInfo, hook)
}

// AddOnboardingInfo registers a hook that adds a module's fields to the
// answer of GET /onboarding/{agent_id} for reader ("" for anonymous). It
// must be called before the relay serves (from Mount).
func (s *Server) AddOnboardingInfo(hook func(row map[string]any, agentID, reader string)) {
	s.onboardingInfo = append(s.onboardingInfo, hook)
}

// OnboardingInfo adds what the modules give an agent's onboarding answer
// for reader (see AddOnboardingInfo); the directory calls it.
func (s *Server) OnboardingInfo(row map[string]any, agentID, reader string) {
	for _, h := range s.onboardingInfo {
		h(row, agentID, reader)
	}
}

// answerPublish writes a publish answer with the modules' fields for e.
func (s *Server) answerPublish(c echo.Context, e *protocol.Event, ans *PublishAnswer) error {
	if len(s.publishInfo) == 0 || !ans.Stored || ans.Duplicate {
		return writeAnswer(c, ans)
	}
	out := map[string]any{}
	for _, h := range s.publishInfo {
		for k, v := range h(e) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return writeAnswer(c, ans)
	}
	out["id"], out["accepted"], out["duplicate"], out["stored"] = ans.ID, ans.Accepted, ans.Duplicate, ans.Stored
	if len(ans.Warnings) > 0 {
		out["warnings"] = ans.Warnings
	} else {
		delete(out, "warnings")
	}
	if ans.LeafIndex != nil {
		out["leaf_index"] = *ans.LeafIndex
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, b)
}
