package cache

import (
	"bytes"
	"encoding/json"
	"strings"

	"switchyard/internal/jsonspan"
	"switchyard/wire"
)

// Accumulator reads a stream in the client's format as the gateway relays
// it (the framed events EventStream.Next returns), turns each event into
// canonical deltas (what coalesced followers render in their own format)
// and gathers the answer for an entry. Only a stream whose terminal event
// arrived ([DONE], message_stop, response.completed or .incomplete) with a
// storable finish becomes an entry. It is not safe for concurrent use.
type Accumulator struct {
	format   wire.Format
	maxBytes int

	pending []byte // an event split across Add calls
	text    strings.Builder
	calls   []ToolCall
	args    []strings.Builder
	size    int

	// OpenAI: tool index -> call; a fresh id at a known index is a new call
	oaIndex map[int]int
	// idSums is each call's id hashed (idSum), which a fresh id is told
	// by: the id itself is kept only while the answer fits maxBytes
	idSums []uint64
	// Anthropic: block index -> call; Responses: output index -> call
	blockCall map[int]int

	finish string
	usage  Usage
	ended  bool // the terminal event arrived
	bad    string
	final  *Entry // Responses: built from the terminal event's object
}

// NewAccumulator reads a stream in format; an answer larger than maxBytes
// (max_entry_bytes) is relayed but not kept.
func NewAccumulator(format wire.Format, maxBytes int64) *Accumulator {
	return &Accumulator{format: format, maxBytes: int(min(maxBytes, 1<<40))}
}

// OK reports whether the stream can still become an entry and be shared
// with followers (no error event, nothing the entry cannot replay).
func (a *Accumulator) OK() bool { return a.bad == "" }

// Ended reports whether the terminal event arrived.
func (a *Accumulator) Ended() bool { return a.ended }

func (a *Accumulator) fail(why string) {
	if a.bad == "" {
		a.bad = why
	}
}

// Add reads framed events, appends the deltas they carry to ds and returns
// it. Events after the terminal one are ignored, and so is every event
// once the stream can no longer become an entry or be shared (OK false):
// nothing of it is kept any more.
func (a *Accumulator) Add(frames []byte, ds []Delta) []Delta {
	if a.bad != "" {
		a.pending = nil
		return ds
	}
	if len(a.pending) > 0 {
		frames = append(a.pending, frames...)
		a.pending = nil
	}
	for len(frames) > 0 {
		end := bytes.Index(frames, []byte("\n\n"))
		if end < 0 {
			if len(a.pending)+len(frames) > a.maxBytes+(64<<10) {
				a.fail("event too large")
				return ds
			}
			a.pending = append(a.pending[:0:0], frames...)
			return ds
		}
		name, data := splitEvent(frames[:end])
		frames = frames[end+2:]
		if a.bad != "" {
			return ds
		}
		if data == nil || a.ended {
			continue
		}
		switch a.format {
		case wire.FormatOpenAI:
			ds = a.openAIEvent(data, ds)
		case wire.FormatAnthropic:
			ds = a.anthropicEvent(name, data, ds)
		case wire.FormatResponses:
			ds = a.responsesEvent(name, data, ds)
		}
	}
	return ds
}

// splitEvent reads one event's name and data (data: lines joined by "\n").
func splitEvent(ev []byte) (name string, data []byte) {
	for len(ev) > 0 {
		line := ev
		if i := bytes.IndexByte(ev, '\n'); i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if v, ok := bytes.CutPrefix(line, []byte("event:")); ok {
			name = string(bytes.TrimSpace(v))
		} else if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			v = bytes.TrimPrefix(v, []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, v...)
		}
	}
	return name, data
}

func (a *Accumulator) addText(s string, ds []Delta) []Delta {
	if s == "" {
		return ds
	}
	a.size += len(s)
	if a.size <= a.maxBytes {
		a.text.WriteString(s)
	}
	return append(ds, Delta{Kind: DeltaText, Text: s})
}

// maxStreamCalls bounds the tool calls of one stream the accumulator
// tracks: a stream that starts more (no model's answer does) is relayed
// but neither stored nor shared, so a hostile upstream's stream of calls
// costs the node no more than this many calls' bookkeeping (SPEC 14).
const maxStreamCalls = 4096

// callEncoded is the least an entry's encoding spends on a tool call (the
// lengths of its id, name and arguments): counted toward maxBytes, so a
// stream of empty calls passes it too.
const callEncoded = 3

// startCall starts tool call i, reported false when the stream has more
// calls than the accumulator tracks (it then fails). The call's id and
// name are kept only while the answer fits maxBytes: beyond, the entry is
// lost, and the calls are only counted for the followers' deltas.
func (a *Accumulator) startCall(id, name string, ds []Delta) (int, []Delta, bool) {
	i := len(a.calls)
	if i >= maxStreamCalls {
		a.fail("more tool calls than a stream may have")
		return -1, ds, false
	}
	a.size += len(id) + len(name) + callEncoded
	if a.size <= a.maxBytes {
		a.calls = append(a.calls, ToolCall{ID: id, Name: name})
	} else {
		a.calls = append(a.calls, ToolCall{})
	}
	a.idSums = append(a.idSums, idSum(id))
	a.args = append(a.args, strings.Builder{})
	return i, append(ds, Delta{Kind: DeltaTool, Index: i, ID: id, Name: name}), true
}

// freshID reports whether id starts a call other than call: it is set
// and not call's id (compared whole while the id is kept, else by idSum).
func (a *Accumulator) freshID(call int, id string) bool {
	if id == "" {
		return false
	}
	if kept := a.calls[call].ID; kept != "" {
		return id != kept
	}
	return idSum(id) != a.idSums[call]
}

// idSum is id hashed (FNV-1a), to tell a call's id without keeping it.
func idSum(id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint64(id[i])) * 1099511628211
	}
	return h
}

func (a *Accumulator) addArgs(i int, s string, ds []Delta) []Delta {
	if s == "" || i < 0 || i >= len(a.args) {
		return ds
	}
	a.size += len(s)
	if a.size <= a.maxBytes {
		a.args[i].WriteString(s)
	}
	return append(ds, Delta{Kind: DeltaTool, Index: i, Args: s})
}

func (a *Accumulator) openAIEvent(data []byte, ds []Delta) []Delta {
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		a.ended = true
		return ds
	}
	var ch oaChunk
	if jsonspan.Decode(data, &ch, openAIChunkFast) != nil || ch.Error != nil {
		a.fail("error or garbage event")
		return ds
	}
	if ch.Usage != nil {
		a.usage = ch.Usage.usage()
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			a.fail("n > 1")
			continue
		}
		if c.Delta.Refusal != nil && *c.Delta.Refusal != "" {
			a.fail("refusal")
		}
		if !isNull(c.Delta.Audio) {
			a.fail("audio output")
		}
		if c.Delta.Content != nil {
			ds = a.addText(*c.Delta.Content, ds)
		}
		for _, tc := range c.Delta.ToolCalls {
			idx := 0
			if tc.Index != nil {
				idx = *tc.Index
			}
			if a.oaIndex == nil {
				a.oaIndex = map[int]int{}
			}
			call, known := a.oaIndex[idx]
			if !known || a.freshID(call, tc.ID) {
				var ok bool
				if call, ds, ok = a.startCall(tc.ID, tc.Function.Name, ds); !ok {
					return ds
				}
				a.oaIndex[idx] = call
			}
			ds = a.addArgs(call, tc.Function.Arguments, ds)
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			a.finish = *c.FinishReason
		}
	}
	return ds
}

func (a *Accumulator) anthropicEvent(name string, data []byte, ds []Delta) []Delta {
	if name == "ping" {
		return ds
	}
	var ev anEvent
	if jsonspan.Decode(data, &ev, anthropicEventFast) != nil {
		a.fail("garbage event")
		return ds
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			a.usage = ev.Message.Usage.usage()
		}
	case "content_block_start":
		b := ev.ContentBlock
		if b == nil {
			return ds
		}
		switch b.Type {
		case "text":
			ds = a.addText(b.Text, ds)
		case "tool_use":
			if a.blockCall == nil {
				a.blockCall = map[int]int{}
			}
			call, ds2, ok := a.startCall(b.ID, b.Name, ds)
			if ds = ds2; !ok {
				return ds
			}
			a.blockCall[ev.Index] = call
		default:
			a.fail("content block " + b.Type)
		}
	case "content_block_delta":
		if ev.Delta == nil {
			return ds
		}
		switch ev.Delta.Type {
		case "text_delta":
			ds = a.addText(ev.Delta.Text, ds)
		case "input_json_delta":
			call, ok := a.blockCall[ev.Index]
			if !ok {
				call = -1
			}
			ds = a.addArgs(call, ev.Delta.PartialJSON, ds)
		default:
			a.fail("delta " + ev.Delta.Type)
		}
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			a.finish = finishOfStop(ev.Delta.StopReason)
			if a.finish == "" {
				a.fail("stop reason " + ev.Delta.StopReason)
			}
		}
		if u := ev.Usage; u != nil {
			a.usage.CompletionTokens = u.OutputTokens
			if p := u.usage(); p.PromptTokens > 0 {
				a.usage.PromptTokens, a.usage.CachedTokens = p.PromptTokens, p.CachedTokens
			}
		}
	case "message_stop":
		a.ended = true
	case "error":
		a.fail("error event")
	}
	return ds
}

func (a *Accumulator) responsesEvent(name string, data []byte, ds []Delta) []Delta {
	// every event of the object (created, in_progress, the terminal one)
	// echoes the request's tools, tens of KB for an agent: only the
	// members read here are decoded, and a terminal event's object is
	// read apart
	var ev rsEvent
	obj, fast := responsesEventFast(data, &ev)
	if !fast {
		ev = rsEvent{}
		if err := json.Unmarshal(onlyMembers(data, responsesEventFields), &ev); err != nil {
			a.fail("garbage event")
			return ds
		}
	}
	if ev.Type == "" {
		ev.Type = name
	}
	switch ev.Type {
	case "response.output_text.delta":
		ds = a.addText(ev.Delta, ds)
	case "response.output_item.added":
		if ev.Item != nil && ev.Item.Type == "function_call" {
			if a.blockCall == nil {
				a.blockCall = map[int]int{}
			}
			call, ds2, ok := a.startCall(ev.Item.CallID, ev.Item.Name, ds)
			if ds = ds2; !ok {
				return ds
			}
			a.blockCall[ev.OutputIndex] = call
		}
	case "response.function_call_arguments.delta":
		call, ok := a.blockCall[ev.OutputIndex]
		if !ok {
			call = -1
		}
		ds = a.addArgs(call, ev.Delta, ds)
	case "response.refusal.delta":
		a.fail("refusal")
	case "response.completed", "response.incomplete":
		a.ended = true
		if !fast {
			obj = responseMember(data)
		}
		// as responsesEntry reads a sync answer; obj was validated with
		// its event (either reading of the event checks the whole of it)
		r, ok := responsesObjectTrusted(obj)
		if !ok {
			r = respObjectIn{}
			if err := json.Unmarshal(onlyMembers(obj, respObjectFields), &r); err != nil {
				a.fail("terminal event")
				return ds
			}
		}
		e, err := r.entry()
		if err != nil {
			a.fail(err.Error())
			return ds
		}
		a.final, a.finish, a.usage = e, e.Finish, e.Usage
	case "response.failed", "error":
		a.fail("failed")
	}
	return ds
}

// responsesEventFields are the members of a Responses event responsesEvent
// decodes; the object of a terminal event is read by responseMember.
var responsesEventFields = []string{"type", "output_index", "delta", "item"}

// responseMember is the "response" member of the event data (valid JSON),
// as json.Unmarshal into a json.RawMessage field named Response finds it:
// the last member whose key is that name in any case. A key with an escape
// leaves it to json.Unmarshal.
func responseMember(data []byte) json.RawMessage {
	var span []byte
	plain := wire.EachMember(data, func(k, v []byte) bool {
		if bytes.IndexByte(k, '\\') >= 0 {
			return false
		}
		if len(k) == len("response") && strings.EqualFold(string(k), "response") {
			span = v
		}
		return true
	})
	if plain {
		return span
	}
	var ev struct {
		Response json.RawMessage `json:"response"`
	}
	_ = json.Unmarshal(data, &ev)
	return ev.Response
}

// Entry is the stream's entry once its terminal event arrived. u, when
// not zero, is the usage the upstream reported (EventStream.Usage): an
// OpenAI client that did not ask for include_usage never saw it.
func (a *Accumulator) Entry(m Meta, u Usage) (*Entry, error) {
	if !a.ended {
		return nil, notStorable("stream ended before its terminal event")
	}
	if a.bad != "" {
		return nil, notStorable(a.bad)
	}
	if a.size > a.maxBytes {
		return nil, notStorable("answer larger than max_entry_bytes")
	}
	e := a.final
	if e == nil {
		e = &Entry{Text: a.text.String(), Finish: a.finish, Usage: a.usage}
		for i, c := range a.calls {
			c.Arguments = a.args[i].String()
			if c.Arguments == "" && a.format == wire.FormatAnthropic {
				c.Arguments = "{}"
			}
			e.ToolCalls = append(e.ToolCalls, c)
		}
	}
	if u != (Usage{}) {
		e.Usage = u
	}
	if err := e.checkFinish(); err != nil {
		return nil, err
	}
	e.setMeta(m)
	return e, nil
}

// Finished is how the stream ended, once its terminal event arrived with a
// storable finish and nothing it could not share (OK): an entry with the
// finish, the usage (u when not zero, as for Entry) and m, and no content.
// It is what the followers of an answer that Entry refuses only for its
// size (over maxBytes: SPEC 18 does not store it) still need: each was
// handed every delta, and ends its stream with the finish.
func (a *Accumulator) Finished(m Meta, u Usage) (*Entry, error) {
	if !a.ended {
		return nil, notStorable("stream ended before its terminal event")
	}
	if a.bad != "" {
		return nil, notStorable(a.bad)
	}
	e := &Entry{Finish: a.finish, Usage: a.usage}
	if u != (Usage{}) {
		e.Usage = u
	}
	if err := e.checkFinish(); err != nil {
		return nil, err
	}
	e.setMeta(m)
	return e, nil
}
