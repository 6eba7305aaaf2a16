package providers

// The response object's JSON, written by hand. It echoes the request's
// tools, and an agent declares a few dozen of them with schemas of a few
// KB on every turn: json.Marshal compacts and re-validates every schema
// each time the object is written, which a stream does four times
// (response.created, response.in_progress, response.completed and the
// stored body). appendJSON writes what json.Marshal writes, byte for byte
// (TestRespObjectJSONIsMarshal), copying a schema that is already compact
// and holds nothing Marshal escapes (nearly always) as it is.

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"

	"switchyard/wire"
)

// appendJSON appends o as json.Marshal(o) writes it. Its raw members are
// valid JSON (constants, or values of a body wire validated).
func (o *respObject) appendJSON(dst []byte) ([]byte, error) { return o.appendJSONWith(dst, nil) }

// appendJSONWith is appendJSON with the tools' JSON already written
// (appendRespTools of o.Tools; nil: written here). A stream writes the
// object four times, its tools once.
func (o *respObject) appendJSONWith(dst, tools []byte) ([]byte, error) {
	out, err := json.Marshal(o.Output) // a few small items
	if err != nil {
		return nil, err
	}
	if dst == nil {
		dst = make([]byte, 0, o.sizeHint(tools)+len(out))
	}
	str := func(key, s string) {
		dst = append(dst, key...)
		dst = wire.AppendMarshalString(dst, s)
	}
	optStr := func(key string, s *string) {
		if s == nil {
			dst = append(append(dst, key...), "null"...)
			return
		}
		str(key, *s)
	}
	raw := func(key string, r json.RawMessage) {
		dst = append(dst, key...)
		if err == nil {
			dst, err = appendMarshalRaw(dst, r)
		}
	}
	if !finite(o.Temperature) || !finite(o.TopP) {
		return nil, errNotFinite // as json.Marshal refuses them
	}
	str(`{"id":`, o.ID)
	str(`,"object":`, o.Object)
	dst = strconv.AppendInt(append(dst, `,"created_at":`...), o.CreatedAt, 10)
	str(`,"status":`, o.Status)
	raw(`,"error":`, o.Error)
	if o.IncompleteDetails == nil {
		dst = append(dst, `,"incomplete_details":null`...)
	} else {
		str(`,"incomplete_details":{"reason":`, o.IncompleteDetails.Reason)
		dst = append(dst, '}')
	}
	optStr(`,"instructions":`, o.Instructions)
	dst = append(dst, `,"max_output_tokens":`...)
	if o.MaxOutputTokens == nil {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendInt(dst, int64(*o.MaxOutputTokens), 10)
	}
	str(`,"model":`, o.Model)
	dst = append(append(dst, `,"output":`...), out...)
	dst = strconv.AppendBool(append(dst, `,"parallel_tool_calls":`...), o.ParallelToolCalls)
	optStr(`,"previous_response_id":`, o.PreviousResponseID)
	raw(`,"reasoning":`, o.Reasoning)
	dst = strconv.AppendBool(append(dst, `,"store":`...), o.Store)
	dst = wire.AppendMarshalFloat(append(dst, `,"temperature":`...), o.Temperature)
	raw(`,"text":`, o.Text)
	raw(`,"tool_choice":`, o.ToolChoice)
	dst = append(dst, `,"tools":`...)
	if tools != nil {
		dst = append(dst, tools...)
	} else if dst, err = appendRespTools(dst, o.Tools); err != nil {
		return nil, err
	}
	dst = wire.AppendMarshalFloat(append(dst, `,"top_p":`...), o.TopP)
	str(`,"truncation":`, o.Truncation)
	dst = append(dst, `,"usage":`...)
	if o.Usage == nil {
		dst = append(dst, "null"...)
	} else {
		u := o.Usage
		dst = strconv.AppendInt(append(dst, `{"input_tokens":`...), int64(u.InputTokens), 10)
		dst = strconv.AppendInt(append(dst, `,"input_tokens_details":{"cached_tokens":`...), int64(u.InputTokensDetails.CachedTokens), 10)
		dst = strconv.AppendInt(append(dst, `},"output_tokens":`...), int64(u.OutputTokens), 10)
		dst = strconv.AppendInt(append(dst, `,"output_tokens_details":{"reasoning_tokens":`...), int64(u.OutputTokensDetails.ReasoningTokens), 10)
		dst = strconv.AppendInt(append(dst, `},"total_tokens":`...), int64(u.TotalTokens), 10)
		dst = append(dst, '}')
	}
	if o.User != nil {
		str(`,"user":`, *o.User)
	}
	raw(`,"metadata":`, o.Metadata)
	if err != nil {
		return nil, err
	}
	return append(dst, '}'), nil
}

// appendMarshalRaw appends r as json.Marshal writes a json.RawMessage:
// null when nil, else compacted with <, >, &, U+2028 and U+2029 escaped.
// r already in that form (nearly always) is copied as it is.
func appendMarshalRaw(dst []byte, r json.RawMessage) ([]byte, error) {
	if r == nil {
		return append(dst, "null"...), nil
	}
	if marshalsRawAsIs(r) {
		return append(dst, r...), nil
	}
	b, err := json.Marshal(r)
	return append(dst, b...), err
}

// marshalsRawAsIs reports whether r (valid JSON) has no space outside its
// strings and no byte Marshal escapes in a raw value: then Marshal writes
// it unchanged.
func marshalsRawAsIs(r []byte) bool {
	in := false
	for i := 0; i < len(r); i++ {
		c := r[i]
		if rawPlain[c] {
			continue
		}
		switch c {
		case '<', '>', '&':
			return false
		case 0xE2: // U+2028 and U+2029 are E2 80 A8 and E2 80 A9
			if i+2 < len(r) && r[i+1] == 0x80 && r[i+2]&^1 == 0xA8 {
				return false
			}
		case '"':
			in = !in
		case '\\':
			i++ // in a string: the escaped byte (a quote or a backslash among them)
		default: // space
			if !in {
				return false
			}
		}
	}
	return len(r) > 0
}

// rawPlain says which bytes marshalsRawAsIs passes over without a look at
// where they stand.
var rawPlain = func() (t [256]bool) {
	for c := range t {
		switch c {
		case '<', '>', '&', 0xE2, '"', '\\', ' ', '\t', '\n', '\r':
		default:
			t[c] = true
		}
	}
	return t
}()

// appendEvResponse appends the event {"type","response","sequence_number"}
// as json.Marshal(evResponse{...}) writes it; tools as for appendJSONWith.
func appendEvResponse(dst []byte, name string, o *respObject, seq int, tools []byte) ([]byte, error) {
	if dst == nil {
		dst = make([]byte, 0, o.sizeHint(tools)+1024)
	}
	dst = wire.AppendMarshalString(append(dst, `{"type":`...), name)
	dst, err := o.appendJSONWith(append(dst, `,"response":`...), tools)
	if err != nil {
		return nil, err
	}
	dst = strconv.AppendInt(append(dst, `,"sequence_number":`...), int64(seq), 10)
	return append(dst, '}'), nil
}

var errNotFinite = errors.New("providers: a response object's number is not finite")

func finite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }

// appendRespTools appends tools as json.Marshal writes them.
func appendRespTools(dst []byte, tools []respTool) ([]byte, error) {
	if tools == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	for i := range tools {
		t := &tools[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = wire.AppendMarshalString(append(dst, `{"type":`...), t.Type)
		dst = wire.AppendMarshalString(append(dst, `,"name":`...), t.Name)
		dst = append(dst, `,"description":`...)
		if t.Description == nil {
			dst = append(dst, "null"...)
		} else {
			dst = wire.AppendMarshalString(dst, *t.Description)
		}
		var err error
		if dst, err = appendMarshalRaw(append(dst, `,"parameters":`...), t.Parameters); err != nil {
			return nil, err
		}
		dst = append(strconv.AppendBool(append(dst, `,"strict":`...), t.Strict), '}')
	}
	return append(dst, ']'), nil
}

// sizeHint is about the size of o's JSON but its output items: its
// settings, its tools (their JSON when already written) and its
// instructions.
func (o *respObject) sizeHint(tools []byte) int {
	n := 1024 + len(o.Reasoning) + len(o.Text) + len(o.ToolChoice) + len(o.Metadata) + len(tools)
	if o.Instructions != nil {
		n += len(*o.Instructions)
	}
	if tools != nil {
		return n
	}
	return n + toolsSize(o.Tools)
}

// toolsSize is about the size of tools' JSON.
func toolsSize(tools []respTool) int {
	n := 2
	for i := range tools {
		n += 64 + len(tools[i].Name) + len(tools[i].Parameters)
		if d := tools[i].Description; d != nil {
			n += len(*d)
		}
	}
	return n
}
