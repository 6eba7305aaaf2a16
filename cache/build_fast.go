package cache

// The one-pass readers of a sync answer's shape that upstreams send
// (jsonspan.Cursor, without reflection); anything else is read by
// encoding/json, which also words why an answer is not storable.

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"switchyard/internal/jsonspan"
)

// openAIEntryFast reads a sync OpenAI chat answer the way openAIEntry's
// json.Unmarshal does, without reflection, for the shape upstreams send:
// one choice with text content or tool calls, no refusal, audio or
// annotations, usage in integers, every member spelled exactly. ok is false
// for anything else, and openAIEntry decodes it with encoding/json (which
// also gives the reason an answer is not storable).
func openAIEntryFast(body []byte) (e *Entry, ok bool) {
	// one pass that validates as it reads (a body is crossed once, not
	// once to validate and again at every level of nesting)
	c := jsonspan.NewCursor(body)
	e = &Entry{}
	choices := 0
	var seen members // usage at most once
	ok = c.Object(func(k []byte) bool {
		switch exactMember(k, "choices", "usage") {
		case "choices":
			return c.Array(func() bool {
				choices++
				return choices == 1 && openAIChoiceFast(&c, e)
			}) && choices == 1
		case "usage":
			return seen.once(&c, 1, func() bool {
				var u oaUsageIn
				ok := oaUsageInFast(&c, &u)
				e.Usage = u.usage()
				return ok
			})
		case "":
			return skipValue(&c)
		}
		return false
	}) && c.End()
	return e, ok && choices == 1
}

// members records which members of an object a reader has met, one bit
// each, for those it reads only once (a repeated one is left to
// encoding/json, whose merging of a repeat it does not mimic).
type members uint

// first reports whether member b is met for the first time and records it.
func (m *members) first(b members) bool {
	if *m&b != 0 {
		return false
	}
	*m |= b
	return true
}

// once reads a member met at most once (b, recorded in m) with the cursor
// at its value: null, or what read reads.
func (m *members) once(c *jsonspan.Cursor, b members, read func() bool) bool {
	return m.first(b) && (c.Null() || read())
}

// skipValue reads the next value for nothing but its validity.
func skipValue(c *jsonspan.Cursor) bool {
	_, ok := c.Value()
	return ok
}

func openAIChoiceFast(c *jsonspan.Cursor, e *Entry) bool {
	return c.Object(func(k []byte) bool {
		switch exactMember(k, "message", "finish_reason") {
		case "finish_reason":
			v, ok := c.Value()
			if !ok {
				return false
			}
			switch string(v) { // the storable ones, without allocating them
			case `"stop"`, `"length"`, `"tool_calls"`:
				e.Finish = storableFinishes[string(v)]
				return true
			}
			return fastString(v, &e.Finish)
		case "message":
			return c.Object(func(k []byte) bool {
				name := exactMember(k, "content", "refusal", "tool_calls", "audio", "annotations")
				if name == "?" {
					return false
				}
				if name == "tool_calls" {
					// a later tool_calls replaces an earlier one, as in encoding/json
					e.ToolCalls = nil
					return c.Null() || c.Array(func() bool { return openAICallFast(c, e) })
				}
				v, ok := c.Value()
				if !ok {
					return false
				}
				switch name {
				case "content":
					if string(v) == "null" { // a *string: a later null empties it
						e.Text = ""
						return true
					}
					return fastString(v, &e.Text)
				case "refusal": // only an empty one is storable
					return string(v) == "null" || string(v) == `""`
				case "audio":
					return string(v) == "null"
				case "annotations":
					return string(v) == "null" || string(v) == "[]"
				}
				return true
			})
		case "":
			return skipValue(c)
		}
		return false
	})
}

// openAICallFast appends one tool call of a message to e: its id and its
// function's name and arguments (a null call is left to encoding/json).
func openAICallFast(c *jsonspan.Cursor, e *Entry) bool {
	var call ToolCall
	ok := c.Object(func(k []byte) bool {
		switch exactMember(k, "id", "function") {
		case "id":
			return stringNext(c, &call.ID)
		case "function":
			// a second function object fills what it names, as encoding/json does
			return c.Null() || stringFields(c, functionFields, &call.Name, &call.Arguments)
		case "":
			return skipValue(c)
		}
		return false
	})
	if ok {
		e.ToolCalls = append(e.ToolCalls, call)
	}
	return ok
}

// oaUsageInFast reads an OpenAI usage object into u as json.Unmarshal
// does (a sync answer's and a stream's last chunk's).
func oaUsageInFast(c *jsonspan.Cursor, u *oaUsageIn) bool {
	var seen members // prompt_tokens_details at most once
	return c.Object(func(k []byte) bool {
		switch exactMember(k, "prompt_tokens", "completion_tokens", "prompt_tokens_details") {
		case "prompt_tokens":
			return intNext(c, &u.PromptTokens)
		case "completion_tokens":
			return intNext(c, &u.CompletionTokens)
		case "prompt_tokens_details":
			return seen.once(c, 1, func() bool {
				u.PromptTokensDetails = &struct {
					CachedTokens int `json:"cached_tokens"`
				}{}
				return intFields(c, cachedFields, &u.PromptTokensDetails.CachedTokens)
			})
		case "":
			return skipValue(c)
		}
		return false
	})
}

// anthropicEntryFast reads a sync Anthropic Messages answer the way
// anthropicEntry's json.Unmarshal does, for the shape upstreams send: text
// and tool_use blocks, every member spelled exactly, each of the fields
// the entry takes once, strings and integers where the struct has them.
// ok is false for anything else (null blocks and inputs included), and
// anthropicEntry decodes it with encoding/json.
func anthropicEntryFast(body []byte) (e *Entry, ok bool) {
	c := jsonspan.NewCursor(body)
	e = &Entry{}
	var u anUsageIn
	var text strings.Builder
	var stop string
	var seen members // content, stop_reason and usage each at most once
	ok = c.Object(func(k []byte) bool {
		switch exactMember(k, "type", "content", "stop_reason", "usage") {
		case "type":
			var t string
			return stringNext(&c, &t)
		case "content":
			return seen.once(&c, 1, func() bool { return c.Array(func() bool { return anthropicBlockFast(&c, e, &text) }) })
		case "stop_reason":
			return seen.first(2) && stringNext(&c, &stop)
		case "usage":
			return seen.once(&c, 4, func() bool { return anthropicUsageFast(&c, &u) })
		case "":
			return skipValue(&c)
		}
		return false
	}) && c.End()
	e.Finish, e.Usage, e.Text = finishOfStop(stop), u.usage(), text.String()
	return e, ok
}

// anthropicBlockFast reads one content block into e: its text appended to
// text, or its tool call. Any other type is left to encoding/json.
func anthropicBlockFast(c *jsonspan.Cursor, e *Entry, text *strings.Builder) bool {
	var typ, txt, id, name string
	var input []byte
	ok := c.Object(func(k []byte) bool {
		switch exactMember(k, "type", "text", "id", "name", "input") {
		case "type":
			return stringNext(c, &typ)
		case "text":
			return stringNext(c, &txt)
		case "id":
			return stringNext(c, &id)
		case "name":
			return stringNext(c, &name)
		case "input":
			v, ok := c.Value()
			input = v
			return ok && string(v) != "null"
		case "":
			return skipValue(c)
		}
		return false
	})
	switch {
	case !ok:
		return false
	case typ == "text":
		text.WriteString(txt)
	case typ == "tool_use":
		e.ToolCalls = append(e.ToolCalls, ToolCall{ID: id, Name: name, Arguments: compactJSON(json.RawMessage(input))})
	default:
		return false
	}
	return true
}

func anthropicUsageFast(c *jsonspan.Cursor, u *anUsageIn) bool {
	return intFields(c, anUsageFields, &u.InputTokens, &u.OutputTokens, &u.CacheCreationInputTokens, &u.CacheReadInputTokens)
}

// The members of the small objects stringFields and intFields read.
var (
	functionFields = []string{"name", "arguments"}
	partFields     = []string{"type", "text"}
	reasonFields   = []string{"reason"}
	cachedFields   = []string{"cached_tokens"}
	anUsageFields  = []string{"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"}
)

// stringFields reads an object whose members names[i] are strings (or
// null), each into dst[i], and skips its other members.
func stringFields(c *jsonspan.Cursor, names []string, dst ...*string) bool {
	return fieldsNext(c, stringNext, names, dst)
}

// intFields is stringFields for integers.
func intFields(c *jsonspan.Cursor, names []string, dst ...*int) bool {
	return fieldsNext(c, intNext, names, dst)
}

func fieldsNext[T any](c *jsonspan.Cursor, next func(*jsonspan.Cursor, *T) bool, names []string, dst []*T) bool {
	return c.Object(func(k []byte) bool {
		i, ok := fieldOf(c, k, names, nil)
		if i < 0 || !ok {
			return ok
		}
		return next(c, dst[i])
	})
}

// fieldOf reads the key k of an object a fast reader walks, the cursor at
// its value: the index in names of the member k names, or -1 for a key
// that names none, whose value it reads past. ok is false when the reader
// gives up: a key that names a member otherwise than exactly (exactMember),
// or, with seen, a member met a second time.
func fieldOf(c *jsonspan.Cursor, k []byte, names []string, seen *members) (i int, ok bool) {
	switch n := exactMember(k, names...); n {
	case "":
		return -1, skipValue(c)
	case "?":
		return -1, false
	default:
		i = slices.Index(names, n)
		return i, seen == nil || seen.first(1<<i)
	}
}

// stringNext reads the next value into *p when it is a string; null leaves
// *p as it is (encoding/json's reading of null into a string).
func stringNext(c *jsonspan.Cursor, p *string) bool {
	v, ok := c.Value()
	return ok && fastString(v, p)
}

// intNext reads the next value into *p when it is an integer that fits;
// null leaves *p as it is.
func intNext(c *jsonspan.Cursor, p *int) bool {
	v, ok := c.Value()
	if !ok {
		return false
	}
	if string(v) == "null" {
		return true
	}
	return intValue(v, p)
}

// intValue reads v, a JSON value that is not null, into *p when it is an
// integer that fits, as encoding/json sets an int field.
func intValue(v []byte, p *int) bool {
	n, err := strconv.Atoi(string(v))
	*p = n
	return err == nil
}

// responsesObjectFast reads what an entry needs of a Responses object the
// way responsesEntry's json.Unmarshal does, for the shape the gateway and
// upstreams write: message items of output_text parts and function_call
// items, every member spelled exactly, incomplete_details, output, usage
// and each item's content at most once, strings and integers where the
// struct has them. ok is false for anything else (null items or parts
// included), and responsesEntry decodes it with encoding/json.
func responsesObjectFast(body []byte) (r respObjectIn, ok bool) {
	return readResponsesObject(jsonspan.NewCursor(body))
}

// responsesObjectTrusted is responsesObjectFast for a body known to be
// valid JSON (a stream's terminal object, validated with its event): the
// values are measured, not validated again.
func responsesObjectTrusted(body []byte) (r respObjectIn, ok bool) {
	return readResponsesObject(jsonspan.NewTrustedCursor(body))
}

// readResponsesObject is responsesObjectFast's reading with the cursor c
// at the start of the object.
func readResponsesObject(c jsonspan.Cursor) (r respObjectIn, ok bool) {
	var seen members // incomplete_details, output and usage each at most once
	ok = c.Object(func(k []byte) bool {
		switch exactMember(k, "status", "incomplete_details", "output", "usage") {
		case "status":
			return stringNext(&c, &r.Status)
		case "incomplete_details":
			return seen.once(&c, 1, func() bool {
				r.IncompleteDetails = &respIncomplete{}
				return stringFields(&c, reasonFields, &r.IncompleteDetails.Reason)
			})
		case "output":
			return seen.once(&c, 2, func() bool {
				r.Output = []respItemIn{}
				return c.Array(func() bool {
					var it respItemIn
					ok := respItemFast(&c, &it)
					r.Output = append(r.Output, it)
					return ok
				})
			})
		case "usage":
			return seen.once(&c, 4, func() bool {
				r.Usage = &respUsageIn{}
				return respUsageFast(&c, r.Usage)
			})
		case "":
			return skipValue(&c)
		}
		return false
	}) && c.End()
	return r, ok
}

func respItemFast(c *jsonspan.Cursor, it *respItemIn) bool {
	var seen members // content at most once
	return c.Object(func(k []byte) bool {
		switch exactMember(k, "type", "content", "call_id", "name", "arguments") {
		case "type":
			return stringNext(c, &it.Type)
		case "call_id":
			return stringNext(c, &it.CallID)
		case "name":
			return stringNext(c, &it.Name)
		case "arguments":
			return stringNext(c, &it.Arguments)
		case "content":
			return seen.once(c, 1, func() bool {
				it.Content = []respPartIn{}
				return c.Array(func() bool {
					var p respPartIn
					ok := stringFields(c, partFields, &p.Type, &p.Text)
					it.Content = append(it.Content, p)
					return ok
				})
			})
		case "":
			return skipValue(c)
		}
		return false
	})
}

func respUsageFast(c *jsonspan.Cursor, u *respUsageIn) bool {
	var seen members // input_tokens_details at most once
	return c.Object(func(k []byte) bool {
		switch exactMember(k, "input_tokens", "output_tokens", "input_tokens_details") {
		case "input_tokens":
			return intNext(c, &u.InputTokens)
		case "output_tokens":
			return intNext(c, &u.OutputTokens)
		case "input_tokens_details":
			return seen.once(c, 1, func() bool { return intFields(c, cachedFields, &u.InputTokensDetails.CachedTokens) })
		case "":
			return skipValue(c)
		}
		return false
	})
}
