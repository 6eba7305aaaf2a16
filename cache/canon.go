package cache

// The canonical form of a request (SPEC 18): every field that can change
// the answer, spelled one way whatever the client format, so that an OpenAI
// chat request and the same conversation sent as Anthropic Messages or
// Responses reduce to one value. JSON key order and whitespace vanish
// because the body is decoded; a field that is absent (or null) stays
// absent, never filled with the API's default. Fields the formats share are
// mapped onto one name; every other top-level field is kept in Extra in
// canonical JSON, so an unknown field can only split entries, never merge
// two requests whose answers differ.

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"switchyard/internal/jsonspan"
	"switchyard/wire"
)

// Canon is a request reduced to what can change its answer. Key hashes
// its fields in a fixed order (appendHashed); its JSON encoding is for
// reading in tests and logs.
type Canon struct {
	Op                string                     `json:"op"`
	Model             string                     `json:"model"`
	System            []string                   `json:"system,omitempty"`
	Messages          []Msg                      `json:"messages,omitempty"`
	Tools             []Tool                     `json:"tools,omitempty"`
	ToolChoice        string                     `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool                      `json:"parallel_tool_calls,omitempty"`
	ResponseFormat    *RespFormat                `json:"response_format,omitempty"`
	Temperature       *float64                   `json:"temperature,omitempty"`
	TopP              *float64                   `json:"top_p,omitempty"`
	Seed              *int64                     `json:"seed,omitempty"`
	Stop              []string                   `json:"stop,omitempty"`
	MaxTokens         *int64                     `json:"max_tokens,omitempty"`
	N                 *int64                     `json:"n,omitempty"`
	ReasoningEffort   string                     `json:"reasoning_effort,omitempty"`
	Verbosity         string                     `json:"verbosity,omitempty"`
	Input             json.RawMessage            `json:"input,omitempty"` // embeddings: always an array
	Dimensions        *int64                     `json:"dimensions,omitempty"`
	EncodingFormat    string                     `json:"encoding_format,omitempty"`
	Extra             map[string]json.RawMessage `json:"extra,omitempty"`

	toolsSum *[sha256.Size]byte // Tools' digest when the memo had it (toolsDigest)
}

// Msg is one conversation turn: user, assistant or tool (a tool result),
// or system for a system message sent after the conversation began (the
// system messages before every turn are lifted into Canon.System:
// addSystem).
type Msg struct {
	Role    string `json:"role"`
	Name    string `json:"name,omitempty"`
	Parts   []Part `json:"parts,omitempty"`
	Calls   []Call `json:"calls,omitempty"`
	CallID  string `json:"call_id,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
	// Extra holds a turn's fields no other format spells (OpenAI's legacy
	// function_call, an audio reference), canonical, by name.
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// Part is one content part: text, image (URL or data: URL) or raw (a part
// no other format spells, in canonical JSON).
type Part struct {
	Type   string `json:"t"`
	Text   string `json:"text,omitempty"`
	URL    string `json:"url,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Call is an assistant's tool call; Args is canonical JSON when it parses.
type Call struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	Args string `json:"args"`
}

// Tool is a declared function tool; Raw holds any other tool kind.
type Tool struct {
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Params      json.RawMessage `json:"params,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
	Raw         json.RawMessage `json:"raw,omitempty"`
}

// RespFormat is the structured-output request: response_format (chat) or
// text.format (Responses).
type RespFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ErrNotCacheable is returned for a request the cache must not answer:
// images, n > 1, log probabilities (wantsLogprobs), a Responses request
// that continues stored state (previous_response_id, conversation,
// item_reference), background mode, or a body whose fields do not parse.
var ErrNotCacheable = errors.New("cache: request is not cacheable")

func notCacheable(why string) error { return fmt.Errorf("%w: %s", ErrNotCacheable, why) }

// excluded are the top-level fields that never change the answer (SPEC 18),
// plus the session and provider-cache hints of SPEC 8.
var excluded = map[string]bool{
	"stream": true, "stream_options": true, "user": true, "metadata": true, "store": true,
	"prompt_cache_key": true, "session_id": true, "safety_identifier": true,
}

// fields is a decoded top-level object whose entries are taken one by one;
// what is left at the end goes into Extra. A request has a dozen fields
// or so: a slice searched in order costs less than a map.
type fields = *fieldSet

type fieldSet struct {
	kv  []field
	buf [10]field // most requests have fewer top-level fields

	// decoded is the wire parse's reading of the same body's messages
	// (ParseRequest; nil from Parse): a message whose content is a string
	// has it there already decoded (textAt).
	decoded []wire.Message
	// items is the wire parse's reading of a Responses input array
	// (ParseRequest, when no item needs the body: responsesItems; nil
	// otherwise), read instead of the body's input.
	items []wire.Item
	team  string // the request's team, which scopes argsMemo ("": none)
}

// args is a tool call's arguments in canonical JSON (canonArgs), read
// from its literal (argsLit) through the team's memo (remembered).
func (f *fieldSet) args(tc *oaCallIn) string {
	if tc.argsLit == nil {
		return canonArgs(tc.Function.Arguments)
	}
	return remembered(f, 'o', tc.argsLit, func() (string, bool) { return canonArgs(wire.DecodeString(tc.argsLit)), true })
}

// remembered is what read makes of raw, from the team's memo when its
// agent sent the same raw before: an agent resends every earlier tool
// call on every turn, and each costs a decode and a canonical JSON walk.
// kind says what raw is (o: an OpenAI arguments literal, a: an Anthropic
// tool_use input, r: Responses arguments decoded), so two readings never
// share an entry. read's result is kept only when it reports ok. The
// memo is scoped by team, so how fast a key is read tells nothing of
// another team's calls.
func remembered[R ~string | ~[]byte](f *fieldSet, kind byte, raw R, read func() (string, bool)) string {
	if f.team == "" || len(f.team)+2+len(raw) > maxArgsMemoKey {
		s, _ := read()
		return s
	}
	var kb [maxArgsMemoKey]byte
	k := append(append(append(kb[:0], f.team...), 0, kind), raw...)
	if c, ok := argsMemo.get(k); ok {
		return c
	}
	c, ok := read()
	if ok {
		argsMemo.put(k, c)
	}
	return c
}

// maxArgsMemoKey bounds the team and literal a memo entry of arguments is
// kept under (built on the stack); longer arguments are read each time.
const maxArgsMemoKey = 1024

// textAt is the parts of message i's content raw (the messages array's
// element i of the body f was read from) when it is a JSON string and the
// wire parse of the body decoded it already: wire.Message.Text is that
// string as wire.DecodeString reads it, which is what textOrParts would
// give again. ok is false otherwise (the caller reads raw). Only a
// message the fast reader took counts: its one content member is spelled
// exactly, which is the member wire's reading takes; encoding/json also
// matches "Content" (the caller drops decoded when it reads that way).
func (f *fieldSet) textAt(i int, raw json.RawMessage) (parts []Part, ok bool) {
	if i >= len(f.decoded) || !isString(raw) {
		return nil, false
	}
	if t := f.decoded[i].Text; t != "" {
		return []Part{{Type: "text", Text: t}}, true
	}
	return nil, true
}

type field struct {
	k []byte // the key as it decodes (a sub-slice of the body unless escaped)
	v json.RawMessage
}

// decodeFields splits body into its top-level fields. valid says body is
// known to be valid JSON (wire.Parse accepted it: encoding/json checks the
// whole input before decoding), so it is not scanned a second time, and
// the values in measured (spans of body) are stepped over unscanned.
func decodeFields(body []byte, valid bool, measured [][]byte) (fields, error) {
	// walked in place (the values are sub-slices of body, never copied)
	if !valid && !jsonspan.Valid(body) {
		return nil, notCacheable("body is not valid JSON")
	}
	f := fieldSets.Get().(*fieldSet)
	f.kv = f.buf[:0]
	ok := wire.EachMemberMeasured(bytes.TrimSpace(body), measured, func(k, v []byte) bool {
		if bytes.IndexByte(k, '\\') >= 0 || !utf8.Valid(k) { // a key means what it decodes to
			var key string
			q := append(append([]byte{'"'}, k...), '"')
			if json.Unmarshal(q, &key) != nil {
				return false
			}
			k = []byte(key)
		}
		if excluded[string(k)] || isNull(v) {
			f.take(string(k)) // a later null or excluded spelling wins, as in encoding/json
			return true
		}
		if i := f.index(string(k)); i >= 0 {
			f.kv[i].v = v
		} else {
			f.kv = append(f.kv, field{k: k, v: v})
		}
		return true
	})
	if !ok {
		f.release()
		return nil, notCacheable("body is not a JSON object")
	}
	return f, nil
}

// fieldSets recycles the field sets of parsed requests: a set is only a
// parse's scratch (what the key keeps is copied out of it or points into
// the body), about half a kilobyte a cacheable request.
var fieldSets = sync.Pool{New: func() any { return new(fieldSet) }}

// release returns f to fieldSets; f must not be used afterwards.
func (f *fieldSet) release() {
	clear(f.buf[:]) // the body's slices, for the collector
	f.kv, f.decoded, f.items, f.team = nil, nil, nil, ""
	fieldSets.Put(f)
}

func (f *fieldSet) index(k string) int {
	for i := range f.kv {
		if string(f.kv[i].k) == k {
			return i
		}
	}
	return -1
}

// get returns field k (nil when absent).
func (f *fieldSet) get(k string) json.RawMessage {
	if i := f.index(k); i >= 0 {
		return f.kv[i].v
	}
	return nil
}

// set replaces or adds field k.
func (f *fieldSet) set(k string, v json.RawMessage) {
	if i := f.index(k); i >= 0 {
		f.kv[i].v = v
		return
	}
	f.kv = append(f.kv, field{k: []byte(k), v: v})
}

// take removes and returns field k (nil when absent).
func (f *fieldSet) take(k string) json.RawMessage {
	i := f.index(k)
	if i < 0 {
		return nil
	}
	v := f.kv[i].v
	f.kv = append(f.kv[:i], f.kv[i+1:]...)
	return v
}

// into decodes field k into v when present.
func (f *fieldSet) into(k string, v any) error {
	raw := f.take(k)
	if raw == nil || decodeScalar(raw, v) {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return notCacheable(k + ": " + err.Error())
	}
	return nil
}

// int is an integer field, nil when absent (into, without a pointer
// variable escaping to the heap for it).
func (f *fieldSet) int(k string) (*int64, error) {
	raw := f.take(k)
	if raw == nil {
		return nil, nil
	}
	if x, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64); err == nil {
		return &x, nil
	}
	var n *int64
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, notCacheable(k + ": " + err.Error())
	}
	return n, nil
}

// decodeScalar decodes the common scalar shapes (a string, an integer, a
// number, a boolean) without encoding/json's reflection and reports
// whether it did; anything else (or anything odd) is left to
// json.Unmarshal, whose result it matches. raw is valid JSON.
func decodeScalar(raw json.RawMessage, v any) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	switch p := v.(type) {
	case *string:
		if raw[0] != '"' {
			return false
		}
		*p = wire.DecodeString(raw)
		return true
	case **int64:
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return false
		}
		*p = &n
		return true
	case **float64:
		if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return false
		}
		x, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return false
		}
		*p = &x
		return true
	case **bool:
		var b bool
		switch string(raw) {
		case "true":
			b = true
		case "false":
		default:
			return false
		}
		*p = &b
		return true
	}
	return false
}

// rest moves every remaining field into c.Extra in canonical JSON.
func (f *fieldSet) rest(c *Canon) error {
	for _, kv := range f.kv {
		cv, err := canonJSON(kv.v)
		if err != nil {
			return err
		}
		if c.Extra == nil {
			c.Extra = make(map[string]json.RawMessage, len(f.kv))
		}
		c.Extra[string(kv.k)] = cv
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// canonArgs is tool-call arguments in canonical JSON; text that is not
// JSON is kept as sent.
func canonArgs(s string) string {
	if strings.TrimSpace(s) == "" {
		return "{}"
	}
	if c, err := canonJSON(json.RawMessage(s)); err == nil && c != nil {
		return string(c)
	}
	return s
}

// appendParts appends ps to out without their empty text parts.
func appendParts(out, ps []Part) []Part {
	for _, p := range ps {
		if p.Type != "text" || p.Text != "" {
			out = append(out, p)
		}
	}
	return out
}

// textOrParts reads a content value that is a string or an array of parts;
// part maps each element to zero or more parts. Empty text parts are dropped.
func textOrParts(raw json.RawMessage, part func(elem json.RawMessage) ([]Part, error)) ([]Part, error) {
	if isNull(raw) {
		return nil, nil
	}
	if isString(raw) {
		s := wire.DecodeString(raw)
		if s == "" {
			return nil, nil
		}
		return []Part{{Type: "text", Text: s}}, nil
	}
	var out []Part
	var err error
	// raw is a span of a validated body, or a value encoding/json decoded
	walked := wire.EachElement(raw, func(e []byte) bool {
		var ps []Part
		if ps, err = part(e); err != nil {
			return false
		}
		out = appendParts(out, ps)
		return true
	})
	if err != nil {
		return nil, err
	}
	if !walked {
		return nil, notCacheable("content is neither a string nor an array")
	}
	return out, nil
}

// rawPart is an unrecognized part kept in canonical JSON.
func rawPart(elem json.RawMessage) (Part, error) {
	c, err := canonJSON(elem)
	return Part{Type: "raw", Text: string(c)}, err
}

// appendMsg adds m to the conversation, merging it into the previous turn
// when both are user or both assistant turns (Anthropic requires
// alternation, so the translators merge them the same way). Empty turns
// are dropped.
func appendMsg(msgs []Msg, m Msg) []Msg {
	if len(m.Parts) == 0 && len(m.Calls) == 0 && m.Extra == nil && m.Role != "tool" {
		return msgs
	}
	if n := len(msgs); n > 0 && m.Role != "tool" && msgs[n-1].Role == m.Role && msgs[n-1].Name == m.Name && m.Extra == nil && msgs[n-1].Extra == nil {
		msgs[n-1].Parts = append(msgs[n-1].Parts, m.Parts...)
		msgs[n-1].Calls = append(msgs[n-1].Calls, m.Calls...)
		return msgs
	}
	return append(msgs, m)
}

// choiceOf maps a tool choice to one spelling: auto, none, required or
// function:NAME; another string is string:VALUE and another object raw:
// and its canonical JSON, so neither spells one of the others.
func choiceOf(raw json.RawMessage) (string, error) {
	var s string
	if isString(raw) && json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			return s, nil
		case "any":
			return "required", nil
		}
		return "string:" + s, nil // no form of the objects' below spells it
	}
	var o struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &o) == nil {
		switch o.Type {
		case "auto", "none":
			return o.Type, nil
		case "any":
			return "required", nil
		case "tool":
			return "function:" + o.Name, nil
		case "function":
			if o.Function != nil {
				return "function:" + o.Function.Name, nil
			}
			return "function:" + o.Name, nil
		}
	}
	c, err := canonJSON(raw)
	return "raw:" + string(c), err
}

// schemaOf is a JSON schema in canonical JSON. A schema of memoMinBytes or
// more comes from schemas, the node's memo of the schemas it canonicalized
// lately, when it holds the same bytes: an agent sends the same tools on
// every turn, and their schemas were most of its key's cost.
func schemaOf(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) < memoMinBytes {
		return canonJSON(raw)
	}
	if c, ok := schemas.get(raw); ok {
		return c, nil
	}
	c, err := canonJSON(raw)
	if err == nil {
		schemas.put(raw, c)
	}
	return c, err
}

// isString reports whether raw is a JSON string, so a value that is not one
// is never decoded as one only to fail (each failed decode validates the
// value and allocates an error).
func isString(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '"'
}
