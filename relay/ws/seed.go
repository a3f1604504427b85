package ws

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/labstack/echo/v4"
)

// The seed's WebSocket dialect (seed §5.3), served at GET /subscribe over
// the same hub, resume and limits as /ws: each frame is one JSON object
// with an "action" instead of a NIP-01 array. A connection translates the
// seed's frames to /ws' on the way in and /ws' to the seed's on the way
// out, so both dialects share every rule (SPEC §14.1):
//
//	client {"action":"sub","id":X,"filter":{...}}        = ["REQ", X, {...}]
//	client {"action":"unsub","id":X}                     = ["CLOSE", X]
//	client {"action":"event","event":{...}}              = ["EVENT", {...}]
//	relay  {"action":"event","sub_id":X,"event":{...},"seq":n} = ["EVENT", X, {...}, n]
//	relay  {"action":"eose","sub_id":X,"through":n}      = ["EOSE", X, n]
//	relay  {"action":"closed","sub_id":X,"message":m}    = ["CLOSED", X, m]
//	relay  {"action":"ok","id":I,"accepted":b,"message":m} = ["OK", I, b, m]
//	relay  {"action":"notice","message":m}               = ["NOTICE", m]

// getSeed is GET /subscribe: GET /ws in the seed's dialect.
func (m *Module) getSeed(c echo.Context) error { return m.upgrade(c, true) }

// seedFrame is a client frame of the seed's dialect.
type seedFrame struct {
	Action string          `json:"action"`
	ID     json.RawMessage `json:"id"`
	Filter json.RawMessage `json:"filter"`
	Event  json.RawMessage `json:"event"`
}

// parse parses one client message in the connection's dialect.
func (c *conn) parse(msg []byte) (Frame, error) {
	if !c.seed {
		return ParseFrame(msg)
	}
	b, err := SeedToFrame(msg)
	if err != nil {
		return Frame{}, err
	}
	return ParseFrame(b)
}

// SeedToFrame rewrites a seed-dialect client message as the /ws frame it
// stands for (see the table above); it fails with invalid_frame. Unknown
// members are ignored, as the seed's JSON objects allow.
func SeedToFrame(msg []byte) ([]byte, error) {
	var f seedFrame
	dec := json.NewDecoder(bytes.NewReader(msg))
	if err := dec.Decode(&f); err != nil || !isObject(msg) {
		return nil, bad("a /subscribe frame must be a JSON object with an action")
	}
	if dec.More() {
		return nil, bad("a /subscribe message holds one JSON object")
	}
	present := func(r json.RawMessage) bool { return len(r) > 0 && string(r) != "null" }
	switch f.Action {
	case "sub":
		if !present(f.ID) {
			return nil, bad(`"sub" needs an "id"`)
		}
		if present(f.Filter) {
			return join("REQ", f.ID, f.Filter), nil
		}
		return join("REQ", f.ID), nil
	case "unsub":
		if !present(f.ID) {
			return nil, bad(`"unsub" needs an "id"`)
		}
		return join("CLOSE", f.ID), nil
	case "event":
		if !present(f.Event) {
			return nil, bad(`"event" needs an "event"`)
		}
		return join("EVENT", f.Event), nil
	}
	return nil, bad("unknown action %q (known: sub, unsub, event)", clip(f.Action))
}

// join writes ["typ", parts...].
func join(typ string, parts ...json.RawMessage) []byte {
	b := append([]byte(`["`), typ...)
	b = append(b, '"')
	for _, p := range parts {
		b = append(b, ',')
		b = append(b, bytes.TrimSpace(p)...)
	}
	return append(b, ']')
}

// frame renders a /ws relay frame in the connection's dialect.
func (c *conn) frame(b []byte) []byte {
	if !c.seed {
		return b
	}
	return FrameToSeed(b)
}

// FrameToSeed rewrites a /ws relay frame as the seed dialect's object (see
// the table above). The relay writes only well-formed frames; anything
// else is passed as a notice.
func FrameToSeed(b []byte) []byte {
	var parts []json.RawMessage
	if json.Unmarshal(b, &parts) != nil || len(parts) == 0 {
		return []byte(`{"action":"notice","message":"error: internal error"}`)
	}
	var typ string
	_ = json.Unmarshal(parts[0], &typ)
	out := make([]byte, 0, len(b)+48)
	member := func(name string, v json.RawMessage) {
		out = append(out, `,"`...)
		out = append(out, name...)
		out = append(out, `":`...)
		out = append(out, v...)
	}
	switch {
	case typ == "EVENT" && len(parts) >= 3:
		out = append(out, `{"action":"event"`...)
		member("sub_id", parts[1])
		member("event", parts[2])
		if len(parts) > 3 {
			member("seq", parts[3])
		}
	case typ == "EOSE" && len(parts) == 3:
		out = append(out, `{"action":"eose"`...)
		member("sub_id", parts[1])
		member("through", parts[2])
	case typ == "CLOSED" && len(parts) == 3:
		out = append(out, `{"action":"closed"`...)
		member("sub_id", parts[1])
		member("message", parts[2])
	case typ == "OK" && len(parts) == 4:
		out = append(out, `{"action":"ok"`...)
		member("id", parts[1])
		member("accepted", parts[2])
		member("message", parts[3])
	case typ == "NOTICE" && len(parts) == 2:
		out = append(out, `{"action":"notice"`...)
		member("message", parts[1])
	default:
		return []byte(`{"action":"notice","message":"error: internal error"}`)
	}
	return append(out, '}')
}

// warningMessage is the OK message of an accepted event with warnings
// (SPEC §1.3): "warning: " and the codes, comma-separated.
func warningMessage(ws []protocol.Warning) string {
	codes := make([]string, len(ws))
	for i, w := range ws {
		codes[i] = w.Code
	}
	return "warning: " + strings.Join(codes, ", ")
}
