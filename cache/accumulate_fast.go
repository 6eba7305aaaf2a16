package cache

// A stream's events read without reflection: an upstream sends one event
// per token or few, and json.Unmarshal of each chunk cost a streamed miss
// a few microseconds an event, more than the rest of the cache's work on
// a long answer. The readers take the shape upstreams write (every member
// read spelled exactly, each object member at most once, strings, integers
// and null where the struct has them) and leave anything else to
// json.Unmarshal, which decides: for any event a reader accepts, the result
// is json.Unmarshal's (FuzzResponsesEventFast, FuzzOpenAIChunkFast,
// FuzzAnthropicEventFast).

import (
	"encoding/json"

	"switchyard/internal/jsonspan"
)

// rsEvent is what responsesEvent reads of a Responses stream event.
type rsEvent struct {
	Type        string       `json:"type"`
	OutputIndex int          `json:"output_index"`
	Delta       string       `json:"delta"`
	Item        *rsEventItem `json:"item"`
}

// rsEventItem is what responsesEvent reads of an event's item.
type rsEventItem struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Name   string `json:"name"`
}

// rsEventItemFields are rsEventItem's members, in its order.
var rsEventItemFields = []string{"type", "call_id", "name"}

// responsesEventFast reads ev from an event's data as json.Unmarshal of
// onlyMembers(data, responsesEventFields) does, and obj, the response
// member as responseMember finds it, for the shape upstreams write: every
// member read spelled exactly, item and response at most once, strings
// and an integer where rsEvent has them. One pass that validates as it
// reads: the object a created, in_progress or terminal event echoes (the
// request's tools with it) is crossed once, where the walk before
// validated the event, then skipped over the object, then (a terminal
// event) looked for it again. ok false: the caller decodes with
// encoding/json.
func responsesEventFast(data []byte, ev *rsEvent) (obj []byte, ok bool) {
	c := jsonspan.NewCursor(data)
	var seen members // item and response at most once
	ok = c.Object(func(k []byte) bool {
		switch exactMember(k, "type", "output_index", "delta", "item", "response") {
		case "type":
			return stringNext(&c, &ev.Type)
		case "output_index":
			return intNext(&c, &ev.OutputIndex)
		case "delta":
			return stringNext(&c, &ev.Delta)
		case "item":
			return seen.once(&c, 1, func() bool {
				it := &rsEventItem{}
				ev.Item = it
				return stringFields(&c, rsEventItemFields, &it.Type, &it.CallID, &it.Name)
			})
		case "response":
			if !seen.first(2) {
				return false
			}
			var ok bool
			obj, ok = c.Value()
			return ok
		case "":
			return skipValue(&c)
		}
		return false
	}) && c.End()
	return obj, ok
}

// oaChunk is what openAIEvent reads of a chat completion chunk.
type oaChunk struct {
	Choices []oaChunkChoice  `json:"choices"`
	Usage   *oaUsageIn       `json:"usage"`
	Error   *json.RawMessage `json:"error"`
}

type oaChunkChoice struct {
	Index        int          `json:"index"`
	Delta        oaChunkDelta `json:"delta"`
	FinishReason *string      `json:"finish_reason"`
}

type oaChunkDelta struct {
	Content   *string         `json:"content"`
	Refusal   *string         `json:"refusal"`
	Audio     json.RawMessage `json:"audio"`
	ToolCalls []oaChunkCall   `json:"tool_calls"`
}

type oaChunkCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// openAIChunkFast reads ch from a chunk's data as json.Unmarshal does, for
// the shape upstreams write; ok false: the caller decodes with
// encoding/json.
func openAIChunkFast(data []byte, ch *oaChunk) bool {
	c := jsonspan.NewCursor(data)
	var seen members // choices, usage, error at most once
	return c.Object(func(k []byte) bool {
		switch exactMember(k, "choices", "usage", "error") {
		case "choices":
			return seen.once(&c, 1, func() bool {
				ch.Choices = []oaChunkChoice{}
				return c.Array(func() bool {
					ch.Choices = append(ch.Choices, oaChunkChoice{})
					return oaChoiceFast(&c, &ch.Choices[len(ch.Choices)-1])
				})
			})
		case "usage":
			return seen.once(&c, 2, func() bool {
				ch.Usage = &oaUsageIn{}
				return oaUsageInFast(&c, ch.Usage)
			})
		case "error":
			if !seen.first(4) {
				return false
			}
			v, ok := c.Value()
			if ok && string(v) != "null" {
				raw := json.RawMessage(v)
				ch.Error = &raw
			}
			return ok
		case "":
			return skipValue(&c)
		}
		return false
	}) && c.End()
}

func oaChoiceFast(c *jsonspan.Cursor, ch *oaChunkChoice) bool {
	var seen members // delta at most once
	return c.Object(func(k []byte) bool {
		switch exactMember(k, "index", "delta", "finish_reason") {
		case "index":
			return intNext(c, &ch.Index)
		case "finish_reason":
			return stringPtrNext(c, &ch.FinishReason)
		case "delta":
			return seen.once(c, 1, func() bool { return oaDeltaFast(c, &ch.Delta) })
		case "":
			return skipValue(c)
		}
		return false
	})
}

func oaDeltaFast(c *jsonspan.Cursor, d *oaChunkDelta) bool {
	var seen members // tool_calls at most once
	return c.Object(func(k []byte) bool {
		switch exactMember(k, "content", "refusal", "audio", "tool_calls") {
		case "content":
			return stringPtrNext(c, &d.Content)
		case "refusal":
			return stringPtrNext(c, &d.Refusal)
		case "audio":
			v, ok := c.Value()
			d.Audio = v
			return ok
		case "tool_calls":
			return seen.once(c, 1, func() bool {
				d.ToolCalls = []oaChunkCall{}
				return c.Array(func() bool {
					d.ToolCalls = append(d.ToolCalls, oaChunkCall{})
					return oaCallFast(c, &d.ToolCalls[len(d.ToolCalls)-1])
				})
			})
		case "":
			return skipValue(c)
		}
		return false
	})
}

func oaCallFast(c *jsonspan.Cursor, tc *oaChunkCall) bool {
	var seen members // function at most once
	return c.Object(func(k []byte) bool {
		switch exactMember(k, "index", "id", "function") {
		case "index":
			v, ok := c.Value()
			if !ok {
				return false
			}
			if string(v) == "null" {
				tc.Index = nil
				return true
			}
			var n int
			tc.Index = &n
			return intValue(v, &n)
		case "id":
			return stringNext(c, &tc.ID)
		case "function":
			return seen.once(c, 1, func() bool {
				return stringFields(c, functionFields, &tc.Function.Name, &tc.Function.Arguments)
			})
		case "":
			return skipValue(c)
		}
		return false
	})
}

// stringPtrNext reads the next value into a *string field as
// encoding/json does: null sets it nil, a string points it at the text.
func stringPtrNext(c *jsonspan.Cursor, p **string) bool {
	v, ok := c.Value()
	switch {
	case !ok:
		return false
	case string(v) == "null":
		*p = nil
		return true
	}
	var s string
	if !fastString(v, &s) {
		return false
	}
	*p = &s
	return true
}

// anEvent is what anthropicEvent reads of a Messages stream event.
type anEvent struct {
	Type         string        `json:"type"`
	Index        int           `json:"index"`
	Message      *anEventMsg   `json:"message"`
	ContentBlock *anEventBlock `json:"content_block"`
	Delta        *anEventDelta `json:"delta"`
	Usage        *anUsageIn    `json:"usage"`
}

type anEventMsg struct {
	Usage anUsageIn `json:"usage"`
}

type anEventBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
	ID   string `json:"id"`
	Name string `json:"name"`
}

type anEventDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	PartialJSON string `json:"partial_json"`
	StopReason  string `json:"stop_reason"`
}

// The members of an event's content block and delta anthropicEventFast
// reads, in anEventBlock's and anEventDelta's order.
var (
	anEventBlockFields = []string{"type", "text", "id", "name"}
	anEventDeltaFields = []string{"type", "text", "partial_json", "stop_reason"}
)

// anthropicEventFast reads ev from an event's data as json.Unmarshal does,
// for the shape upstreams write; ok false: the caller decodes with
// encoding/json.
func anthropicEventFast(data []byte, ev *anEvent) bool {
	c := jsonspan.NewCursor(data)
	var seen members // message, content_block, delta, usage at most once
	return c.Object(func(k []byte) bool {
		switch exactMember(k, "type", "index", "message", "content_block", "delta", "usage") {
		case "type":
			return stringNext(&c, &ev.Type)
		case "index":
			return intNext(&c, &ev.Index)
		case "message":
			return seen.once(&c, 1, func() bool {
				ev.Message = &anEventMsg{}
				var usage members
				return c.Object(func(k []byte) bool {
					switch exactMember(k, "usage") {
					case "usage":
						return usage.once(&c, 1, func() bool { return anthropicUsageFast(&c, &ev.Message.Usage) })
					case "":
						return skipValue(&c)
					}
					return false
				})
			})
		case "content_block":
			return seen.once(&c, 2, func() bool {
				b := &anEventBlock{}
				ev.ContentBlock = b
				return stringFields(&c, anEventBlockFields, &b.Type, &b.Text, &b.ID, &b.Name)
			})
		case "delta":
			return seen.once(&c, 4, func() bool {
				d := &anEventDelta{}
				ev.Delta = d
				return stringFields(&c, anEventDeltaFields, &d.Type, &d.Text, &d.PartialJSON, &d.StopReason)
			})
		case "usage":
			return seen.once(&c, 8, func() bool {
				ev.Usage = &anUsageIn{}
				return anthropicUsageFast(&c, ev.Usage)
			})
		case "":
			return skipValue(&c)
		}
		return false
	}) && c.End()
}
