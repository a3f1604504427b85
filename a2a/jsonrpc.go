package a2a

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// JSON-RPC 2.0 and A2A v0.3.0 error codes (D12). They travel with HTTP 200.
const (
	CodeParseError                = -32700
	CodeInvalidRequest            = -32600
	CodeMethodNotFound            = -32601
	CodeInvalidParams             = -32602
	CodeInternalError             = -32603
	CodeTaskNotFound              = -32001
	CodeTaskNotCancelable         = -32002
	CodePushNotSupported          = -32003
	CodeUnsupportedOperation      = -32004
	CodeContentTypeNotSupported   = -32005
	CodeExtendedCardNotConfigured = -32007
)

// messages are the standard texts of each code.
var messages = map[int]string{
	CodeParseError:                "Parse error",
	CodeInvalidRequest:            "Invalid Request",
	CodeMethodNotFound:            "Method not found",
	CodeInvalidParams:             "Invalid params",
	CodeInternalError:             "Internal error",
	CodeTaskNotFound:              "Task not found",
	CodeTaskNotCancelable:         "Task cannot be canceled",
	CodePushNotSupported:          "Push Notification is not supported",
	CodeUnsupportedOperation:      "This operation is not supported",
	CodeContentTypeNotSupported:   "Incompatible content types",
	CodeExtendedCardNotConfigured: "Authenticated Extended Card is not configured",
}

// Error is a JSON-RPC error object. Message is the code's standard text;
// Data says what went wrong and, where it helps, what to do instead.
type Error struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

// Error formats the code, message and data.
func (e *Error) Error() string { return fmt.Sprintf("jsonrpc %d %s: %v", e.Code, e.Message, e.Data) }

// rpcError returns an *Error with code's standard message and a "detail"
// in data, plus any extra key/value pairs.
func rpcError(code int, detail string, kv ...any) *Error {
	e := &Error{Code: code, Message: messages[code], Data: map[string]any{}}
	if detail != "" {
		e.Data["detail"] = detail
	}
	for i := 0; i+1 < len(kv); i += 2 {
		e.Data[kv[i].(string)] = kv[i+1]
	}
	if len(e.Data) == 0 {
		e.Data = nil
	}
	return e
}

func invalidParams(format string, args ...any) *Error {
	return rpcError(CodeInvalidParams, fmt.Sprintf(format, args...))
}

// request is one parsed JSON-RPC request object. ID is the raw id (absent
// for a notification).
type request struct {
	ID     json.RawMessage
	HasID  bool
	Method string
	Params json.RawMessage
}

// response is one JSON-RPC response object.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

func errorResponse(id json.RawMessage, err *Error) response {
	if id == nil {
		id = nullID
	}
	return response{JSONRPC: "2.0", ID: id, Error: err}
}

func resultResponse(id json.RawMessage, result any) response {
	return response{JSONRPC: "2.0", ID: id, Result: result}
}

// parseRequest validates one request object (JSON-RPC 2.0 §4). On failure
// it returns an -32600 error and whatever id could be recovered.
func parseRequest(raw json.RawMessage) (request, *Error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return request{}, rpcError(CodeInvalidRequest, "a request must be a JSON object")
	}
	var r request
	if id, ok := fields["id"]; ok {
		if !validID(id) {
			return request{}, rpcError(CodeInvalidRequest, "id must be a string, a number or null")
		}
		r.ID, r.HasID = id, true
	}
	var version string
	if err := json.Unmarshal(fields["jsonrpc"], &version); err != nil || version != "2.0" {
		return r, rpcError(CodeInvalidRequest, `"jsonrpc" must be exactly "2.0"`)
	}
	if err := json.Unmarshal(fields["method"], &r.Method); err != nil || r.Method == "" {
		return r, rpcError(CodeInvalidRequest, `"method" must be a non-empty string`)
	}
	if p, ok := fields["params"]; ok && string(bytes.TrimSpace(p)) != "null" { // null is taken as absent
		p = bytes.TrimSpace(p)
		if len(p) == 0 || (p[0] != '{' && p[0] != '[') {
			return r, rpcError(CodeInvalidRequest, `"params" must be an object or an array`)
		}
		r.Params = p
	}
	return r, nil
}

func validID(id json.RawMessage) bool {
	id = bytes.TrimSpace(id)
	if len(id) == 0 {
		return false
	}
	switch c := id[0]; {
	case c == '"', c == 'n':
		return true
	case c == '-' || c >= '0' && c <= '9':
		return true
	}
	return false
}

// decodeParams decodes the params object into v; a missing params is an
// empty object. Arrays (positional params) are rejected: every A2A method
// takes named params.
func decodeParams(p json.RawMessage, v any) *Error {
	if len(p) == 0 {
		p = json.RawMessage("{}")
	}
	if p[0] != '{' {
		return invalidParams("params must be an object (A2A methods take named params)")
	}
	if err := json.Unmarshal(p, v); err != nil {
		return invalidParams("params: %s", jsonProblem(err))
	}
	return nil
}

// jsonProblem turns a decoding error into a short text naming the field.
func jsonProblem(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok && te.Field != "" {
		return fmt.Sprintf("%s must be %s, not %s", te.Field, jsonType(te.Type.Kind().String()), te.Value)
	}
	return err.Error()
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "int", "int64", "float64":
		return "a number"
	case "bool":
		return "a boolean"
	case "slice":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	}
	return kind
}
