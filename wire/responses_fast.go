package wire

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"switchyard/internal/jsonspan"
)

// The Responses input's items and content parts, read without reflection
// in the shape clients send: every member spelled exactly once, each
// string field a JSON string. Anything else (a member in another case or
// with an escape, one named twice, a null or another type where a string
// belongs) goes to encoding/json, which decides and words the error: so
// for any item the fast readers accept, the result is json.Unmarshal's
// (TestFastItemMatchesEncodingJSON, FuzzFastItem). The body was validated
// whole before (parseResponses' json.Unmarshal); each item decoded with
// json.Unmarshal was validated again, and its content parts once more: a
// 64 KiB conversation took 2.3 ms to parse, most of it in those scans.

var rawItemFields = [...]string{"type", "id", "role", "status", "content", "call_id", "name", "arguments", "output"}

var rawPartFields = [...]string{"type", "text", "refusal", "image_url", "file_id", "detail"}

// fastItem decodes one input item (valid JSON) into ri, through
// jsonspan.Decode.
func fastItem(raw []byte, ri *rawItem) bool {
	return EachField(raw, rawItemFields[:], func(f int, val []byte) bool { return itemMember(ri, f, val) })
}

// itemMember decodes member f of rawItemFields, val, into ri; false when
// it is not of the fast path's shape.
func itemMember(ri *rawItem, f int, val []byte) bool {
	switch f {
	case 4:
		ri.Content = val
	case 8:
		ri.Output = val
	default:
		strs := [...]*string{0: &ri.Type, 1: &ri.ID, 2: &ri.Role, 3: &ri.Status, 5: &ri.CallID, 6: &ri.Name, 7: &ri.Arguments}
		var ok bool
		*strs[f], ok = exactString(val)
		return ok
	}
	return true
}

var rawToolFields = [...]string{"type", "name", "description", "parameters", "strict"}

// fastTool decodes one tool (valid JSON) into t, through
// jsonspan.Decode. An agent declares its tools, each with a schema of a
// few KB, on every turn.
func fastTool(raw []byte, t *rawTool) bool {
	return EachField(raw, rawToolFields[:], func(f int, val []byte) bool { return toolMember(t, f, val) })
}

// toolMember decodes member f of rawToolFields, val, into t; false when it
// is not of the fast path's shape.
func toolMember(t *rawTool, f int, val []byte) bool {
	switch f {
	case 3:
		t.Parameters = val
	case 4:
		switch string(val) {
		case "true", "false":
			b := val[0] == 't'
			t.Strict = &b
		case "null":
			t.Strict = nil
		default:
			return false
		}
	default:
		strs := [...]*string{0: &t.Type, 1: &t.Name, 2: &t.Description}
		var ok bool
		*strs[f], ok = exactString(val)
		return ok
	}
	return true
}

// decodeParts decodes an array of content parts (valid JSON) into rps.
func decodeParts(raw []byte, rps *[]rawPart) error {
	if fastParts(raw, rps) {
		return nil
	}
	*rps = (*rps)[:0]
	return json.Unmarshal(raw, rps)
}

func fastParts(raw []byte, rps *[]rawPart) bool {
	err := jsonspan.EachElement(raw, func(_ int, elem []byte) error {
		var p rawPart
		if !EachField(elem, rawPartFields[:], func(f int, val []byte) bool { return partMember(&p, f, val) }) {
			return errSlowPath
		}
		*rps = append(*rps, p)
		return nil
	})
	return err == nil
}

// partMember decodes member f of rawPartFields, val, into p; false when it
// is not a string.
func partMember(p *rawPart, f int, val []byte) bool {
	strs := [...]*string{&p.Type, &p.Text, &p.Refusal, &p.ImageURL, &p.FileID, &p.Detail}
	var ok bool
	*strs[f], ok = exactString(val)
	return ok
}

// EachField walks the object b (valid JSON), calling set with the index in
// fields of each member named exactly so; false (the caller goes to
// encoding/json) when b is not an object, any key is named twice
// (keyList), a key is spelled so that encoding/json would match it to a
// field (another case, an escape: Unicode folding, so "ſtream" with a long
// s is stream), or set refuses a value. Members that name no field are
// skipped, as encoding/json skips them. fastBody, fastResponsesBody,
// fastItem and fastParts are this walk over their fields, and so are the
// response cache's readers of the key (cache/key_fast.go).
func EachField(b []byte, fields []string, set func(f int, val []byte) bool) bool {
	var keys keyList
	err := jsonspan.EachMember(b, func(key, val []byte) error {
		f, ok := keys.field(key, fields)
		if !ok || f >= 0 && !set(f, val) {
			return errSlowPath
		}
		return nil
	})
	return err == nil
}

// field is EachField's rule for one more key of the object l holds the
// keys of: the index in fields of the field key names, -1 for a key that
// names none (which encoding/json skips), and ok false when the object is
// left to encoding/json: a key named twice (keyList: escaped or in another
// case too, which also covers a field given twice), or one that names a
// field otherwise than exactly (another case, an escape: Unicode folding,
// so "ſtream" with a long s is stream).
func (l *keyList) field(key []byte, fields []string) (f int, ok bool) {
	if l.repeats(key) {
		return -1, false
	}
	if f = slices.Index(fields, string(key)); f >= 0 {
		return f, true
	}
	if bytes.IndexByte(key, '\\') >= 0 {
		return -1, false
	}
	for _, name := range fields {
		if strings.EqualFold(name, string(key)) {
			return -1, false
		}
	}
	return -1, true
}

// StringValue is exactString for the adapters: a JSON string value (valid
// JSON) decoded as encoding/json decodes it, ok false when it is anything
// else or holds invalid UTF-8 (json.Unmarshal then decides).
func StringValue(val []byte) (string, bool) { return exactString(val) }

// exactString decodes a JSON string (valid JSON) as encoding/json does,
// escapes included; ok false for anything else (null, another type) and
// for a string with invalid UTF-8, whose replacement encoding/json decides.
func exactString(val []byte) (string, bool) {
	if len(val) < 2 || val[0] != '"' || !utf8.Valid(val) {
		return "", false
	}
	return decodeString(val), true
}

var responsesBodyFields = [...]string{
	"model", "stream", "input", "instructions", "tools", "tool_choice", "max_output_tokens", "temperature",
	"top_p", "parallel_tool_calls", "text", "reasoning", "metadata", "store", "previous_response_id", "user",
	"safety_identifier", "prompt_cache_key", "session_id", "conversation",
}

// fastResponsesBody is json.Unmarshal into b for the shape clients send
// (EachField's terms; numbers plain, booleans true or false, a null only
// where b holds a pointer or raw JSON), in one pass that validates as it
// reads (jsonspan.Cursor). The input array's items and the tools, most of
// an agent's bytes, are read where they stand (each by fastItem's and
// fastTool's terms, a message's content parts by fastParts') and made the
// Items and Tools parseInput and parseTools make (b.items, b.tools), Input
// and Tools then being their spans: before, the body was validated, then
// input and tools were each skipped, counted and walked again, and every
// item's content counted and walked once more. At most maxItems items, as
// many content parts in all and maxResponsesTools tools are read: past
// that, for an item or tool the checks refuse, or for any other shape,
// false, and the multi-pass path decides and words the error.
func fastResponsesBody(body []byte, b *responsesBody, maxItems int) bool {
	c := jsonspan.NewCursor(body)
	var keys keyList
	partsLeft := maxItems
	return c.Object(func(key []byte) bool {
		f, ok := keys.field(key, responsesBodyFields[:])
		switch {
		case !ok:
			return false
		case f == 2 && c.Peek() == '[': // input
			b.Input, b.itemsRead = c.Span(func() bool { return fastItems(&c, &b.items, maxItems, &partsLeft) })
			return b.itemsRead
		case f == 4 && c.Peek() == '[': // tools
			b.Tools, b.toolsRead = c.Span(func() bool { return fastRespTools(&c, &b.tools) })
			return b.toolsRead
		}
		val, ok := c.Value()
		return ok && (f < 0 || responsesMember(b, f, val))
	}) && c.End()
}

// responsesMember decodes member f of responsesBodyFields, val, into b;
// false when it is not of the fast path's shape.
func responsesMember(b *responsesBody, f int, val []byte) bool {
	switch f {
	case 0, 14, 15, 16, 17, 18:
		strs := [...]*string{0: &b.Model, 14: &b.PreviousResponseID, 15: &b.User, 16: &b.SafetyIdentifier, 17: &b.PromptCacheKey, 18: &b.SessionID}
		var ok bool
		*strs[f], ok = exactString(val)
		return ok
	case 2, 3, 4, 5, 10, 11, 12, 19:
		raws := [...]*json.RawMessage{2: &b.Input, 3: &b.Instructions, 4: &b.Tools, 5: &b.ToolChoice, 10: &b.Text, 11: &b.Reasoning, 12: &b.Metadata, 19: &b.Conversation}
		*raws[f] = val
		return true
	}
	null := string(val) == "null"
	switch f {
	case 1:
		b.Stream = string(val) == "true"
		return b.Stream || string(val) == "false"
	case 6:
		if null {
			b.MaxOutputTokens = nil
			return true
		}
		var ok bool
		b.MaxOutputTokens, ok = plainInt(val)
		return ok
	case 7, 8:
		p := &b.Temperature
		if f == 8 {
			p = &b.TopP
		}
		if null {
			*p = nil
			return true
		}
		x, ok := plainFloat(val)
		*p = x
		return ok
	case 9, 13:
		p := &b.ParallelToolCalls
		if f == 13 {
			p = &b.Store
		}
		switch string(val) {
		case "null":
			*p = nil
		case "true", "false":
			v := string(val) == "true"
			*p = &v
		default:
			return false
		}
		return true
	}
	return false
}

// fastItems reads an input array at the cursor into items, each decoded
// as fastItem decodes it (content parts read in place when an array, at
// most partsLeft in all) and made an Item as parseInput makes it (itemOf,
// under a budget of max content parts): false past max items or partsLeft
// parts, for an item fastItem would leave to encoding/json, or for one
// itemOf refuses (the multi-pass path then words the error in its order).
func fastItems(c *jsonspan.Cursor, items *[]Item, max int, partsLeft *int) bool {
	var scratch []rawPart // every item's parts in turn: itemOf copies them
	budget, i := max, 0
	ok := c.Array(func() bool {
		if i == max {
			return false
		}
		ri := rawItem{parts: scratch[:0]}
		var keys keyList
		if !c.Object(func(key []byte) bool {
			f, ok := keys.field(key, rawItemFields[:])
			switch {
			case !ok:
				return false
			case f == 4 && c.Peek() == '[':
				ri.Content, ri.partsRead = c.Span(func() bool { return fastPartsAt(c, &ri.parts, partsLeft) })
				return ri.partsRead
			}
			val, ok := c.Value()
			return ok && (f < 0 || itemMember(&ri, f, val))
		}) {
			return false
		}
		scratch = ri.parts
		it, err := itemOf(&ri, i, &budget)
		if err != nil {
			return false
		}
		if it.Type != "" { // else a dropped item (reasoning)
			*items = append(*items, it)
		}
		i++
		return true
	})
	if ok && *items == nil {
		*items = make([]Item, 0) // as parseInput makes it for an empty array
	}
	return ok
}

// fastPartsAt reads a content array at the cursor into rps as fastParts
// does, each part taken from left: false past it.
func fastPartsAt(c *jsonspan.Cursor, rps *[]rawPart, left *int) bool {
	return c.Array(func() bool {
		if *left == 0 {
			return false
		}
		*left--
		*rps = append(*rps, rawPart{})
		p := &(*rps)[len(*rps)-1]
		return fieldsAt(c, rawPartFields[:], func(f int, val []byte) bool { return partMember(p, f, val) })
	})
}

// fieldsAt is EachField for the object at the cursor, read (and validated)
// in the cursor's one pass.
func fieldsAt(c *jsonspan.Cursor, fields []string, set func(f int, val []byte) bool) bool {
	var keys keyList
	return c.Object(func(key []byte) bool {
		f, ok := keys.field(key, fields)
		if !ok {
			return false
		}
		val, ok := c.Value()
		return ok && (f < 0 || set(f, val))
	})
}

// fastRespTools reads a tools array at the cursor into ts, each decoded as
// fastTool decodes it and kept as parseTools keeps it (addTool): false
// past maxResponsesTools, for a tool fastTool would leave to encoding/json
// or for one addTool refuses (the multi-pass path then words the error).
func fastRespTools(c *jsonspan.Cursor, ts *[]Tool) bool {
	*ts = make([]Tool, 0) // as parseTools makes it for an empty array
	i := 0
	return c.Array(func() bool {
		if i == maxResponsesTools {
			return false
		}
		var t rawTool
		if !fieldsAt(c, rawToolFields[:], func(f int, val []byte) bool { return toolMember(&t, f, val) }) || addTool(ts, i, &t) != nil {
			return false
		}
		i++
		return true
	})
}

// plainFloat is a JSON number as encoding/json sets a *float64 field to
// it; ok false for anything else, or one out of float64's range.
func plainFloat(val []byte) (*float64, bool) {
	if len(val) == 0 || (val[0] != '-' && (val[0] < '0' || val[0] > '9')) {
		return nil, false
	}
	x, err := strconv.ParseFloat(string(val), 64)
	if err != nil {
		return nil, false
	}
	return &x, true
}
