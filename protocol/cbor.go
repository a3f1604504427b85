package protocol

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/fxamacker/cbor/v2"
)

// ContentTypeCBOR is the media type of the CBOR envelope (seed §9.2).
const ContentTypeCBOR = "application/anp+cbor"

var (
	cborDec cbor.DecMode
	cborEnc cbor.EncMode
)

func init() {
	var err error
	cborDec, err = cbor.DecOptions{
		DupMapKey:          cbor.DupMapKeyEnforcedAPF,
		IndefLength:        cbor.IndefLengthForbidden,
		TagsMd:             cbor.TagsForbidden,
		MaxNestedLevels:    8,
		MaxArrayElements:   4096,
		MaxMapPairs:        64,
		DefaultMapType:     reflect.TypeOf(map[string]any(nil)),
		IntDec:             cbor.IntDecConvertNone,
		UTF8:               cbor.UTF8RejectInvalid,
		ByteStringToString: cbor.ByteStringToStringForbidden,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	// Core deterministic encoding (RFC 8949 §4.2.1): shortest integers and
	// lengths, definite lengths, map keys sorted bytewise by encoded bytes.
	cborEnc, err = cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
}

// DecodeCBOR decodes one deterministic-CBOR event envelope (§9.2, D10). It
// rejects indefinite lengths, semantic tags, byte strings, floats in the
// envelope, non-text or duplicate map keys and trailing items, and applies the
// same member rules as DecodeJSON. Failures are *EnvelopeError.
func DecodeCBOR(b []byte) (*Event, error) {
	var env EnvelopeError
	var v any
	if err := cborDec.Unmarshal(b, &v); err != nil {
		env.add(cborReason(err), "value_error.cbor")
		return nil, &env
	}
	m, ok := v.(map[string]any)
	if !ok {
		env.add("event must be a CBOR map with text keys", "value_error.cbor")
		return nil, &env
	}
	if err := rejectCBORExtras(m); err != nil {
		env.add(err.Error(), "value_error.cbor")
		return nil, &env
	}
	return fromGeneric(m)
}

func cborReason(err error) string {
	var extra *cbor.ExtraneousDataError
	if errors.As(err, &extra) {
		return "trailing data after the CBOR item"
	}
	return "invalid CBOR: " + err.Error()
}

// rejectCBORExtras walks the decoded value and rejects CBOR types that have no
// JSON counterpart in the envelope (byte strings, floats).
func rejectCBORExtras(v any) error {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if err := rejectCBORExtras(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := rejectCBORExtras(e); err != nil {
				return err
			}
		}
	case []byte:
		return errors.New("byte strings are not allowed; encode binary data as base64 text")
	case float32, float64:
		return errors.New("floating-point numbers are not allowed in the envelope")
	case string, uint64, int64, bool, nil:
	default:
		return fmt.Errorf("unsupported CBOR item %T", v)
	}
	return nil
}

type cborEvent struct {
	ID        string     `cbor:"id"`
	AgentID   string     `cbor:"agent_id"`
	CreatedAt int64      `cbor:"created_at"`
	Kind      int64      `cbor:"kind"`
	Tags      [][]string `cbor:"tags"`
	Content   string     `cbor:"content"`
	Sig       string     `cbor:"sig"`
}

// EncodeCBOR returns the deterministic CBOR encoding of e.
func EncodeCBOR(e *Event) ([]byte, error) {
	tags := e.Tags
	if tags == nil {
		tags = [][]string{}
	}
	c := cborEvent{e.ID, e.AgentID, e.CreatedAt, e.Kind, tags, e.Content, e.Sig}
	for i := range c.Tags {
		if c.Tags[i] == nil {
			c.Tags[i] = []string{}
		}
	}
	return cborEnc.Marshal(c)
}

// EncodeCBORList returns the deterministic CBOR encoding of an array of events.
func EncodeCBORList(evs []*Event) ([]byte, error) {
	list := make([]cborEvent, len(evs))
	for i, e := range evs {
		tags := e.Tags
		if tags == nil {
			tags = [][]string{}
		}
		list[i] = cborEvent{e.ID, e.AgentID, e.CreatedAt, e.Kind, tags, e.Content, e.Sig}
	}
	return cborEnc.Marshal(list)
}

// SplitCBORList splits a definite-length CBOR array into its items, each
// still encoded, so a batch can be judged item by item. It returns an
// *EnvelopeError when b is not one array.
func SplitCBORList(b []byte) ([][]byte, error) {
	var items []cbor.RawMessage
	if err := cborDec.Unmarshal(b, &items); err != nil {
		var env EnvelopeError
		env.add("body must be one CBOR array of events: "+cborReason(err), "value_error.cbor")
		return nil, &env
	}
	out := make([][]byte, len(items))
	for i, it := range items {
		out[i] = it
	}
	return out, nil
}
