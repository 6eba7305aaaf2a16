package providers

// The OpenAI Responses API side shared by both translation pairs
// (translate_responses_openai.go: Responses <-> chat completions for openai
// and simulated deployments; translate_responses_anthropic.go: Responses <->
// Messages for anthropic deployments): the response object, its output
// items, and the stream emitter that turns "text arrived", "a tool call
// started", "arguments arrived", "finished" into the standard Responses
// events with increasing sequence numbers (SPEC 10.1).

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"switchyard/routing"
	"switchyard/wire"
)

// NewResponseID returns a fresh "resp_" id: 24 random bytes in hex, so ids
// are unguessable and unique across replicas without coordination.
func NewResponseID() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return "resp_" + hex.EncodeToString(b[:])
}

// ResponsesDone receives a finished response object and its output items
// (the same items, typed, so the store need not parse the object again).
type ResponsesDone func(response []byte, output []wire.Item)

// toItems types output items for the store.
func toItems(out []any) []wire.Item {
	items := make([]wire.Item, 0, len(out))
	for _, o := range out {
		switch v := o.(type) {
		case respMessage:
			it := wire.Item{Type: "message", ID: v.ID, Role: "assistant", Status: v.Status}
			for _, c := range v.Content {
				switch p := c.(type) {
				case respText:
					it.Content = append(it.Content, wire.Part{Type: "output_text", Text: p.Text})
				case respRefusal:
					it.Content = append(it.Content, wire.Part{Type: "refusal", Text: p.Refusal})
				}
			}
			items = append(items, it)
		case respCall:
			items = append(items, wire.Item{Type: "function_call", ID: v.ID, Status: v.Status, CallID: v.CallID, Name: v.Name, Arguments: v.Arguments})
		}
	}
	return items
}

// respID is the request's assigned id, or a fresh one (mockllm, tests).
func respID(rq *wire.Responses) string {
	if rq.ID != "" {
		return rq.ID
	}
	return NewResponseID()
}

// itemID derives an output item id from the response id: msg_<hex>_<n> or
// fc_<hex>_<n>, unique per response and so per team.
func itemID(prefix, respID string, n int) string {
	base := strings.TrimPrefix(respID, "resp_")
	return prefix + base + "_" + strconv.Itoa(n)
}

// respObject is a Responses API response object, fields in the order the
// OpenAI API sends them.
type respObject struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	CreatedAt          int64           `json:"created_at"`
	Status             string          `json:"status"`
	Error              json.RawMessage `json:"error"`
	IncompleteDetails  *respIncomplete `json:"incomplete_details"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Model              string          `json:"model"`
	Output             []any           `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Reasoning          json.RawMessage `json:"reasoning"`
	Store              bool            `json:"store"`
	Temperature        float64         `json:"temperature"`
	Text               json.RawMessage `json:"text"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Tools              []respTool      `json:"tools"`
	TopP               float64         `json:"top_p"`
	Truncation         string          `json:"truncation"`
	Usage              *respUsage      `json:"usage"`
	User               *string         `json:"user,omitempty"`
	Metadata           json.RawMessage `json:"metadata"`
}

type respIncomplete struct {
	Reason string `json:"reason"`
}

type respTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

type respUsage struct {
	InputTokens         int           `json:"input_tokens"`
	InputTokensDetails  cachedDetails `json:"input_tokens_details"`
	OutputTokens        int           `json:"output_tokens"`
	OutputTokensDetails reasonDetails `json:"output_tokens_details"`
	TotalTokens         int           `json:"total_tokens"`
}

type cachedDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type reasonDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// respMessage is an output message item.
type respMessage struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Status  string `json:"status"`
	Content []any  `json:"content"`
	Role    string `json:"role"`
}

// respText is an output_text part.
type respText struct {
	Type        string            `json:"type"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []json.RawMessage `json:"logprobs"`
	Text        string            `json:"text"`
}

type respRefusal struct {
	Type    string `json:"type"`
	Refusal string `json:"refusal"`
}

// respCall is an output function_call item.
type respCall struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
}

var (
	jsonNull    = json.RawMessage("null")
	emptyObject = json.RawMessage("{}")
	textFormat  = json.RawMessage(`{"format":{"type":"text"}}`)
	toolAuto    = json.RawMessage(`"auto"`)
	reasonNull  = json.RawMessage(`{"effort":null,"summary":null}`)
	noRaw       = []json.RawMessage{}
)

func newTextPart(text string) respText {
	return respText{Type: "output_text", Annotations: noRaw, Logprobs: noRaw, Text: text}
}

// baseResponse is the response object with the request's settings echoed
// and no output yet.
func baseResponse(rq *wire.Responses, id string, created int64, model string) *respObject {
	o := &respObject{
		ID: id, Object: "response", CreatedAt: created, Status: "in_progress", Error: jsonNull,
		MaxOutputTokens: rq.MaxOutputTokens, Model: model, Output: []any{},
		ParallelToolCalls: rq.ParallelToolCalls == nil || *rq.ParallelToolCalls,
		Reasoning:         reasonNull, Store: rq.Store, Temperature: 1, Text: textFormat, ToolChoice: toolAuto,
		Tools: []respTool{}, TopP: 1, Truncation: "disabled", Metadata: emptyObject,
	}
	if rq.Instructions != "" {
		s := rq.Instructions
		o.Instructions = &s
	}
	if rq.PreviousResponseID != "" {
		s := rq.PreviousResponseID
		o.PreviousResponseID = &s
	}
	if rq.Reasoning != nil {
		o.Reasoning = rq.Reasoning
	}
	if rq.Temperature != nil {
		o.Temperature = *rq.Temperature
	}
	if rq.TopP != nil {
		o.TopP = *rq.TopP
	}
	if rq.Text != nil {
		o.Text = rq.Text
	}
	if rq.ToolChoice != nil {
		o.ToolChoice = rq.ToolChoice
	}
	if rq.Metadata != nil {
		o.Metadata = rq.Metadata
	}
	if rq.User != "" {
		s := rq.User
		o.User = &s
	}
	for _, t := range rq.Tools {
		rt := respTool{Type: "function", Name: t.Name, Parameters: t.Parameters, Strict: t.Strict != nil && *t.Strict}
		if t.Description != "" {
			d := t.Description
			rt.Description = &d
		}
		if rt.Parameters == nil {
			rt.Parameters = jsonNull
		}
		o.Tools = append(o.Tools, rt)
	}
	return o
}

// settle sets the final status from the upstream's finish reason (chat
// finish_reason vocabulary) and the usage.
func (o *respObject) settle(finish string, u Usage) {
	switch finish {
	case "length":
		o.Status, o.IncompleteDetails = "incomplete", &respIncomplete{Reason: "max_output_tokens"}
	case "content_filter":
		o.Status, o.IncompleteDetails = "incomplete", &respIncomplete{Reason: "content_filter"}
	default:
		o.Status = "completed"
	}
	// the Responses convention is OpenAI's: input_tokens counts the cached
	// tokens, input_tokens_details says how many; output_tokens counts the
	// reasoning tokens, output_tokens_details says how many (SPEC 10.2)
	o.Usage = &respUsage{InputTokens: u.PromptTokens, InputTokensDetails: cachedDetails{CachedTokens: u.CachedTokens},
		OutputTokens: u.CompletionTokens, OutputTokensDetails: reasonDetails{ReasoningTokens: u.reasoning()},
		TotalTokens: u.PromptTokens + u.CompletionTokens}
}

// respCallIn is one tool call of a finished upstream answer.
type respCallIn struct{ id, name, args string }

// buildResponse renders a finished answer (sync) as a response object and
// hands it to done (may be nil).
func buildResponse(rq *wire.Responses, id string, created int64, model, text, refusal string, calls []respCallIn, finish string, u Usage, done ResponsesDone) []byte {
	o := baseResponse(rq, id, created, model)
	n := 0
	if text != "" || refusal != "" || len(calls) == 0 {
		var content []any
		if text != "" || refusal == "" {
			content = append(content, newTextPart(text))
		}
		if refusal != "" {
			content = append(content, respRefusal{Type: "refusal", Refusal: refusal})
		}
		o.Output = append(o.Output, respMessage{ID: itemID("msg_", id, n), Type: "message", Status: "completed", Role: "assistant", Content: content})
		n++
	}
	for _, c := range calls {
		o.Output = append(o.Output, respCall{ID: itemID("fc_", id, n), Type: "function_call", Status: "completed", Arguments: c.args, CallID: c.id, Name: c.name})
		n++
	}
	o.settle(finish, u)
	body, _ := o.appendJSON(nil)
	if done != nil {
		done(body, toItems(o.Output))
	}
	return body
}

// maxRespHeld bounds what a Responses stream holds to write its .done
// events and its final response object: every output item's text and
// arguments, which a relayed stream does not keep. SPEC 14 caps an
// upstream's sync body (maxResponseBody); the answer a translated stream
// holds is capped the same, or an upstream that never stops (within the
// request's timeout) would grow it without bound. A variable for tests.
var maxRespHeld = maxResponseBody

// respItemHeld is what an output item holds besides its text or
// arguments (its ids, name and object), counted against maxRespHeld: an
// upstream that opens tool calls without end is bounded too.
const respItemHeld = 256

// errRespTooLarge ends a Responses stream whose held answer passed
// maxRespHeld.
var errRespTooLarge = &Error{Class: routing.ClassServerError,
	Message: "upstream answer exceeds 64 MiB (a Responses stream holds it for its final object)"}

// respEmitter builds the Responses event stream from what an upstream
// stream reports, one upstream event at a time: each method appends the
// framed events it causes to out, which the converter returns and resets.
// An item stays open (deltas go to it) until another item starts or the
// response finishes; then its .done events are written.
type respEmitter struct {
	rq      *wire.Responses
	tools   []byte // the echoed tools' JSON, written once (toolsJSON)
	id      string
	created int64
	model   string
	done    ResponsesDone // called with the final response object, may be nil

	out     []byte
	seq     int
	started bool
	ended   bool
	items   []any // finished output items

	// the open item: kind 0 none, 1 message, 2 function_call
	kind   int
	itemID string
	text   strings.Builder // the open content part's text or refusal
	// the open message's content part: 0 none, 1 output_text, 2 refusal
	// (OpenAI streams a refusal as a part of its own, with
	// response.refusal.delta events); parts are the parts it closed
	part   int
	parts  []any
	callID string
	name   string
	args   strings.Builder
	key    int // upstream tool index of the open call
	keys   map[int]bool
	held   int // bytes held for the final object (maxRespHeld)
}

func newRespEmitter(rq *wire.Responses, created int64, model string, done ResponsesDone) *respEmitter {
	return &respEmitter{rq: rq, id: respID(rq), created: created, model: model, done: done}
}

// take returns the framed events written so far.
func (e *respEmitter) take() []byte {
	out := e.out
	e.out = nil
	return out
}

// result is a converter's answer to one upstream event: the framed
// events, or errRespTooLarge once the answer held is past maxRespHeld.
func (e *respEmitter) result(end bool) ([]byte, bool, error) {
	if e.held > maxRespHeld {
		e.out = nil
		return nil, false, errRespTooLarge
	}
	return e.take(), end, nil
}

func (e *respEmitter) emit(name string, v any) {
	data, _ := json.Marshal(v)
	e.out = appendEvent(e.out, name, data)
	e.seq++
}

// emitResponse emits an event that carries the response object (an
// evResponse), written by appendEvResponse.
func (e *respEmitter) emitResponse(name string, o *respObject) {
	tools := e.toolsJSON(o)
	// framed in place: the object's JSON is one line (appendEvent's
	// framing of one line); room for it and for the events after it
	e.out = slices.Grow(e.out, o.sizeHint(tools)+2048)
	n := len(e.out)
	e.out = append(append(append(e.out, "event: "...), name...), "\ndata: "...)
	out, err := appendEvResponse(e.out, name, o, e.seq, tools)
	if err != nil {
		e.out = e.out[:n]
		return
	}
	e.out = append(out, '\n', '\n')
	e.seq++
}

// toolsJSON is the tools' JSON of the response objects the stream writes
// (each echoes the same request), written on first use.
func (e *respEmitter) toolsJSON(o *respObject) []byte {
	if e.tools == nil {
		// nil again on failure: each object writes its own
		e.tools, _ = appendRespTools(make([]byte, 0, toolsSize(o.Tools)), o.Tools)
	}
	return e.tools
}

type evResponse struct {
	Type           string      `json:"type"`
	Response       *respObject `json:"response"`
	SequenceNumber int         `json:"sequence_number"`
}

type evItem struct {
	Type           string `json:"type"`
	OutputIndex    int    `json:"output_index"`
	Item           any    `json:"item"`
	SequenceNumber int    `json:"sequence_number"`
}

type evPart struct {
	Type           string `json:"type"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   int    `json:"content_index"`
	Part           any    `json:"part"` // respText or respRefusal
	SequenceNumber int    `json:"sequence_number"`
}

type evTextDone struct {
	Type           string            `json:"type"`
	ItemID         string            `json:"item_id"`
	OutputIndex    int               `json:"output_index"`
	ContentIndex   int               `json:"content_index"`
	Text           string            `json:"text"`
	Logprobs       []json.RawMessage `json:"logprobs"`
	SequenceNumber int               `json:"sequence_number"`
}

type evRefusalDone struct {
	Type           string `json:"type"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   int    `json:"content_index"`
	Refusal        string `json:"refusal"`
	SequenceNumber int    `json:"sequence_number"`
}

type evArgsDone struct {
	Type           string `json:"type"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	Name           string `json:"name"`
	Arguments      string `json:"arguments"`
	SequenceNumber int    `json:"sequence_number"`
}

// start writes response.created and response.in_progress once.
func (e *respEmitter) start() {
	if e.started {
		return
	}
	e.started = true
	o := baseResponse(e.rq, e.id, e.created, e.model)
	e.emitResponse("response.created", o)
	e.emitResponse("response.in_progress", o)
}

// openPart makes the open item a message whose open content part is of
// kind part (1 output_text, 2 refusal), opening the message and closing
// the part before as needed.
func (e *respEmitter) openPart(part int) {
	if e.kind != 1 {
		e.closeItem()
		e.kind, e.itemID = 1, itemID("msg_", e.id, len(e.items))
		e.parts, e.part = nil, 0
		e.held += respItemHeld
		e.emit("response.output_item.added", evItem{Type: "response.output_item.added", OutputIndex: len(e.items),
			Item: respMessage{ID: e.itemID, Type: "message", Status: "in_progress", Role: "assistant", Content: []any{}}, SequenceNumber: e.seq})
	}
	if e.part == part {
		return
	}
	e.closePart()
	e.part = part
	e.text.Reset()
	var p any = newTextPart("")
	if part == 2 {
		p = respRefusal{Type: "refusal"}
	}
	e.emit("response.content_part.added", evPart{Type: "response.content_part.added", ItemID: e.itemID, OutputIndex: len(e.items),
		ContentIndex: len(e.parts), Part: p, SequenceNumber: e.seq})
}

// closePart writes the .done events of the open message's open content
// part and keeps it.
func (e *respEmitter) closePart() {
	idx, ci := len(e.items), len(e.parts)
	text := e.text.String()
	var p any
	switch e.part {
	case 1:
		e.emit("response.output_text.done", evTextDone{Type: "response.output_text.done", ItemID: e.itemID, OutputIndex: idx, ContentIndex: ci, Text: text, Logprobs: noRaw, SequenceNumber: e.seq})
		p = newTextPart(text)
	case 2:
		e.emit("response.refusal.done", evRefusalDone{Type: "response.refusal.done", ItemID: e.itemID, OutputIndex: idx, ContentIndex: ci, Refusal: text, SequenceNumber: e.seq})
		p = respRefusal{Type: "refusal", Refusal: text}
	default:
		return
	}
	e.emit("response.content_part.done", evPart{Type: "response.content_part.done", ItemID: e.itemID, OutputIndex: idx, ContentIndex: ci, Part: p, SequenceNumber: e.seq})
	e.parts = append(e.parts, p)
	e.part = 0
}

// refusalDelta appends refusal text to the open message's refusal part,
// opening them if needed.
func (e *respEmitter) refusalDelta(s string) {
	if s == "" {
		return
	}
	e.start()
	e.openPart(2)
	e.text.WriteString(s)
	e.held += len(s)
	e.emit("response.refusal.delta", struct {
		Type           string `json:"type"`
		ItemID         string `json:"item_id"`
		OutputIndex    int    `json:"output_index"`
		ContentIndex   int    `json:"content_index"`
		Delta          string `json:"delta"`
		SequenceNumber int    `json:"sequence_number"`
	}{"response.refusal.delta", e.itemID, len(e.items), len(e.parts), s, e.seq})
}

// textDelta appends text to the open message, opening one if needed.
func (e *respEmitter) textDelta(s string) {
	if s == "" {
		return
	}
	e.start()
	e.openPart(1)
	e.text.WriteString(s)
	e.held += len(s)
	// the hot event, appended by hand
	const name = "response.output_text.delta"
	b := append(e.out, "event: "+name+"\ndata: {\"type\":\""+name+"\",\"item_id\":"...)
	b = wire.AppendString(b, e.itemID)
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(len(e.items)), 10)
	b = append(b, `,"content_index":`...)
	b = strconv.AppendInt(b, int64(len(e.parts)), 10)
	b = append(b, `,"delta":`...)
	b = wire.AppendString(b, s)
	b = append(b, `,"logprobs":[],"sequence_number":`...)
	b = strconv.AppendInt(b, int64(e.seq), 10)
	e.out = append(b, "}\n\n"...)
	e.seq++
}

// toolStart opens a function_call item for upstream tool index key.
func (e *respEmitter) toolStart(key int, callID, name string) {
	e.start()
	e.closeItem()
	if e.keys == nil {
		e.keys = map[int]bool{}
	}
	e.keys[key] = true
	e.kind, e.key, e.callID, e.name = 2, key, callID, name
	e.itemID = itemID("fc_", e.id, len(e.items))
	e.args.Reset()
	e.held += respItemHeld + len(callID) + len(name)
	e.emit("response.output_item.added", evItem{Type: "response.output_item.added", OutputIndex: len(e.items),
		Item: respCall{ID: e.itemID, Type: "function_call", Status: "in_progress", CallID: callID, Name: name}, SequenceNumber: e.seq})
}

// hasTool reports whether upstream tool index key was started.
func (e *respEmitter) hasTool(key int) bool { return e.keys[key] }

// toolArgs appends argument text to the call with upstream index key. Only
// the open call takes deltas: upstreams stream one call after another.
func (e *respEmitter) toolArgs(key int, delta string) {
	if e.kind != 2 || e.key != key || delta == "" {
		return
	}
	e.args.WriteString(delta)
	e.held += len(delta)
	e.emit("response.function_call_arguments.delta", struct {
		Type           string `json:"type"`
		ItemID         string `json:"item_id"`
		OutputIndex    int    `json:"output_index"`
		Delta          string `json:"delta"`
		SequenceNumber int    `json:"sequence_number"`
	}{"response.function_call_arguments.delta", e.itemID, len(e.items), delta, e.seq})
}

// closeItem writes the .done events of the open item and keeps it.
func (e *respEmitter) closeItem() {
	idx := len(e.items)
	switch e.kind {
	case 1:
		e.closePart()
		item := respMessage{ID: e.itemID, Type: "message", Status: "completed", Role: "assistant", Content: e.parts}
		e.parts = nil
		e.emit("response.output_item.done", evItem{Type: "response.output_item.done", OutputIndex: idx, Item: item, SequenceNumber: e.seq})
		e.items = append(e.items, item)
	case 2:
		args := e.args.String()
		if args == "" {
			args = "{}" // a call with no argument deltas takes no arguments
		}
		e.emit("response.function_call_arguments.done", evArgsDone{Type: "response.function_call_arguments.done", ItemID: e.itemID, OutputIndex: idx, Name: e.name, Arguments: args, SequenceNumber: e.seq})
		item := respCall{ID: e.itemID, Type: "function_call", Status: "completed", Arguments: args, CallID: e.callID, Name: e.name}
		e.emit("response.output_item.done", evItem{Type: "response.output_item.done", OutputIndex: idx, Item: item, SequenceNumber: e.seq})
		e.items = append(e.items, item)
	}
	e.kind = 0
}

// finish closes the open item and writes response.completed (or
// response.incomplete when the output hit its limit) with the whole
// response, then hands that response to done.
func (e *respEmitter) finish(finish string, u Usage) {
	if e.ended {
		return
	}
	e.start()
	e.closeItem()
	e.ended = true
	o := baseResponse(e.rq, e.id, e.created, e.model)
	o.Output = e.items
	if o.Output == nil {
		o.Output = []any{}
	}
	o.settle(finish, u)
	name := "response.completed"
	if o.Status == "incomplete" {
		name = "response.incomplete"
	}
	e.emitResponse(name, o)
	if e.done != nil {
		body, _ := o.appendJSONWith(nil, e.toolsJSON(o))
		e.done(body, toItems(o.Output))
	}
}
