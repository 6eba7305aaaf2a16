package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"sync"

	"switchyard/catalog"
	"switchyard/wire"
)

// Key is the SHA-256 of an entry's scope and canonical request (SPEC 18).
type Key [32]byte

// String is the key in hex, as it appears in a Redis key name.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// keyVersion starts every hashed input: changing the canonical form bumps
// it, so old entries are simply never found again.
const keyVersion = "switchyard-cache-v5"

// Parse reduces a request body to its canonical form. It returns an error
// wrapping ErrNotCacheable for a request the cache must not answer (SPEC
// 18: images never, n > 1 never, Responses only without
// previous_response_id) or whose fields do not parse; the gateway then
// serves it without the cache (and without a cache header).
func Parse(op catalog.Operation, format wire.Format, body []byte) (*Canon, error) {
	return parse("", op, format, body, false, nil, nil)
}

// ParseRequest is Parse of a request of team that wire.Parse accepted:
// its body is known to be valid JSON, so it is walked once without being
// validated again, over the members the wire parse measured and with the
// messages' text it decoded; the team's own memo keeps its tool calls'
// canonical arguments (argsMemo; none for "").
func ParseRequest(req *wire.Request, team string) (*Canon, error) {
	var decoded []wire.Message
	var items []wire.Item
	switch {
	case req.Op == catalog.OpChat && (req.Format == wire.FormatOpenAI || req.Format == wire.FormatAnthropic):
		decoded = req.Messages
	case req.Op == catalog.OpChat && req.Format == wire.FormatResponses && req.Responses != nil:
		items = itemsOfRequest(req.Responses)
	}
	return parse(team, req.Op, req.Format, req.Raw, true, decoded, items, req.Measured[:]...)
}

// itemsOfRequest is the wire parse's reading of a Responses request's input
// when the key may read it instead of the body: nil when it is not the
// body's own (stored turns or references expanded into it) or an item's
// output came as parts, which the key keeps apart and wire joins.
func itemsOfRequest(rq *wire.Responses) []wire.Item {
	if rq.PreviousResponseID != "" || len(rq.Refs) > 0 {
		return nil
	}
	for i := range rq.Input {
		if rq.Input[i].OutputParts {
			return nil
		}
	}
	return rq.Input
}

// parse reads the canonical request of body for team ("": none, no memo
// of arguments); decoded is the wire parse's reading of its messages and
// items its reading of a Responses input array (itemsOfRequest; nil:
// none), measured are spans of body that parse measured
// (wire.Request.Measured), stepped over without a scan.
func parse(team string, op catalog.Operation, format wire.Format, body []byte, valid bool, decoded []wire.Message, items []wire.Item, measured ...[]byte) (*Canon, error) {
	f, err := decodeFields(body, valid, measured)
	if err != nil {
		return nil, err
	}
	defer f.release()
	f.decoded, f.items, f.team = decoded, items, team
	c := &Canon{}
	if err := f.into("model", &c.Model); err != nil {
		return nil, err
	}
	switch {
	case op == catalog.OpEmbeddings && format == wire.FormatOpenAI:
		c.Op = "embeddings"
		err = parseEmbeddings(f, c)
	case op == catalog.OpChat && format == wire.FormatOpenAI:
		c.Op = "chat"
		err = parseOpenAI(f, c)
	case op == catalog.OpChat && format == wire.FormatAnthropic:
		c.Op = "chat"
		err = parseAnthropic(f, c)
	case op == catalog.OpChat && format == wire.FormatResponses:
		c.Op = "chat"
		err = parseResponses(f, c)
	default:
		return nil, notCacheable("operation " + op.String() + " is never cached")
	}
	if err != nil {
		return nil, err
	}
	if c.N != nil && *c.N > 1 {
		return nil, notCacheable("n > 1")
	}
	if err := f.rest(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Key is the entry key of c for a team and, when the client named a tier
// alias, the tier it resolves to ("" otherwise): two teams never share an
// entry, and an easy-tier answer never serves a session pinned hard.
func (c *Canon) Key(team, tier string) Key {
	n := 256 + c.sizeHint()
	if n <= 512 {
		var buf [512]byte // a short request's bytes stay on the stack
		return Key(sha256.Sum256(c.appendHashed(buf[:0], team, tier)))
	}
	// a long conversation's bytes go through a recycled buffer: hashed and
	// dropped, they would be garbage the size of the request every time
	bp := hashBufs.Get().(*[]byte)
	b := c.appendHashed(slices.Grow((*bp)[:0], n), team, tier) // grown once, as sizeHint measures
	k := Key(sha256.Sum256(b))
	if cap(b) <= maxPooledHashBuf {
		*bp = b
		hashBufs.Put(bp)
	}
	return k
}

// hashBufs recycles Key's buffers for requests too long for the stack;
// one larger than maxPooledHashBuf is left to the collector, so the pool
// never holds more than a few of that size.
var hashBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledHashBuf = 1 << 20

// appendHashed appends what Key hashes: the version, the scope and every
// field of c in a fixed order, each string length-prefixed and each
// optional field behind its own tag, so two different canonical requests
// never hash the same bytes (no JSON is built: the fields are already
// canonical).
func (c *Canon) appendHashed(b []byte, team, tier string) []byte {
	for _, s := range [...]string{keyVersion, team, tier, c.Op, c.Model} {
		b = appendStr(b, s)
	}
	tagStrs := func(tag byte, ss []string) {
		if len(ss) > 0 {
			b = append(b, tag)
			b = binary.AppendUvarint(b, uint64(len(ss)))
			for _, s := range ss {
				b = appendStr(b, s)
			}
		}
	}
	tagStr := func(tag byte, s string) {
		if s != "" {
			b = appendStr(append(b, tag), s)
		}
	}
	tagInt := func(tag byte, n *int64) {
		if n != nil {
			b = binary.AppendVarint(append(b, tag), *n)
		}
	}
	tagFloat := func(tag byte, x *float64) {
		if x != nil {
			b = binary.LittleEndian.AppendUint64(append(b, tag), math.Float64bits(*x))
		}
	}
	tagBool := func(tag byte, v *bool) {
		if v != nil {
			b = append(b, tag, boolByte(*v))
		}
	}
	tagStrs('s', c.System)
	if len(c.Messages) > 0 {
		b = binary.AppendUvarint(append(b, 'm'), uint64(len(c.Messages)))
		for i := range c.Messages {
			b = c.Messages[i].appendHashed(b)
		}
	}
	if len(c.Tools) > 0 {
		sum := c.toolsSum
		if sum == nil {
			d := toolsDigest(c.Tools)
			sum = &d
		}
		b = append(append(b, 't'), sum[:]...)
	}
	tagStr('c', c.ToolChoice)
	tagBool('p', c.ParallelToolCalls)
	if rf := c.ResponseFormat; rf != nil {
		b = append(b, 'f')
		for _, s := range [...][]byte{[]byte(rf.Type), []byte(rf.Name), []byte(rf.Description), rf.Schema} {
			b = appendBytes(b, s)
		}
		b = appendOptBool(b, rf.Strict)
	}
	tagFloat('T', c.Temperature)
	tagFloat('P', c.TopP)
	tagInt('S', c.Seed)
	tagStrs('x', c.Stop)
	tagInt('M', c.MaxTokens)
	tagInt('N', c.N)
	tagStr('r', c.ReasoningEffort)
	tagStr('v', c.Verbosity)
	if len(c.Input) > 0 {
		b = appendBytes(append(b, 'i'), c.Input)
	}
	tagInt('D', c.Dimensions)
	tagStr('e', c.EncodingFormat)
	b = appendMap(b, 'X', c.Extra)
	return b
}

// toolsDigest is what a key hashes for its tools: the SHA-256 of each
// tool's canonical fields, length-prefixed, in order (hashed apart so that
// the memo keeps it with the tools it read: see toolSet).
func toolsDigest(ts []Tool) [sha256.Size]byte {
	n := 0
	for _, t := range ts {
		n += len(t.Name) + len(t.Description) + len(t.Params) + len(t.Raw) + 24
	}
	b := binary.AppendUvarint(make([]byte, 0, n+8), uint64(len(ts)))
	for _, t := range ts {
		for _, s := range [...][]byte{[]byte(t.Name), []byte(t.Description), t.Params, t.Raw} {
			b = appendBytes(b, s)
		}
		b = appendOptBool(b, t.Strict)
	}
	return sha256.Sum256(b)
}

func (m *Msg) appendHashed(b []byte) []byte {
	b = appendStr(b, m.Role)
	b = appendStr(b, m.Name)
	b = binary.AppendUvarint(b, uint64(len(m.Parts)))
	for _, p := range m.Parts {
		for _, s := range [...]string{p.Type, p.Text, p.URL, p.Detail} {
			b = appendStr(b, s)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(m.Calls)))
	for _, c := range m.Calls {
		for _, s := range [...]string{c.ID, c.Name, c.Args} {
			b = appendStr(b, s)
		}
	}
	b = appendStr(b, m.CallID)
	b = append(b, boolByte(m.IsError))
	return appendMap(b, 'X', m.Extra)
}

// sizeHint is about what appendHashed writes for c: Key sizes its buffer
// so before writing, which then seldom grows it.
func (c *Canon) sizeHint() int {
	n := len(c.Input)
	for _, s := range c.System {
		n += len(s) + 2
	}
	for i := range c.Messages {
		for _, p := range c.Messages[i].Parts {
			n += len(p.Text) + len(p.URL) + 8
		}
		for _, k := range c.Messages[i].Calls {
			n += len(k.ID) + len(k.Name) + len(k.Args) + 6
		}
		n += 16
	}
	return n + len(c.Tools) + sha256.Size
}

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendOptBool writes an optional boolean as one of three bytes.
func appendOptBool(b []byte, v *bool) []byte {
	if v == nil {
		return append(b, 2)
	}
	return append(b, boolByte(*v))
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// appendMap writes a map's members in key order behind tag (nothing for an
// empty map, which JSON's omitempty also left out).
func appendMap(b []byte, tag byte, m map[string]json.RawMessage) []byte {
	if len(m) == 0 {
		return append(b, 0)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = binary.AppendUvarint(append(b, tag), uint64(len(keys)))
	for _, k := range keys {
		b = appendStr(b, k)
		b = appendBytes(b, m[k])
	}
	return b
}

// KeyOf is Parse then Key.
func KeyOf(op catalog.Operation, format wire.Format, body []byte, team, tier string) (Key, error) {
	c, err := Parse(op, format, body)
	if err != nil {
		return Key{}, err
	}
	return c.Key(team, tier), nil
}

func parseEmbeddings(f fields, c *Canon) error {
	if raw := f.take("input"); raw != nil {
		var s string
		if isString(raw) && json.Unmarshal(raw, &s) == nil {
			raw, _ = json.Marshal([]string{s}) // one string answers like a list of one
		}
		in, err := canonJSON(raw)
		if err != nil {
			return err
		}
		c.Input = in
	}
	if err := f.into("dimensions", &c.Dimensions); err != nil {
		return err
	}
	return f.into("encoding_format", &c.EncodingFormat)
}

// common reads the sampling fields the formats spell alike.
func common(f fields, c *Canon) error {
	for _, p := range []struct {
		k string
		v any
	}{{"temperature", &c.Temperature}, {"top_p", &c.TopP}, {"seed", &c.Seed}, {"n", &c.N},
		{"parallel_tool_calls", &c.ParallelToolCalls}, {"verbosity", &c.Verbosity}} {
		if err := f.into(p.k, p.v); err != nil {
			return err
		}
	}
	if raw := f.take("tool_choice"); raw != nil {
		tc, err := choiceOf(raw)
		if err != nil {
			return err
		}
		c.ToolChoice = tc
	}
	return nil
}

func parseOpenAI(f fields, c *Canon) error {
	if wantsLogprobs(f) {
		return notCacheable("log probabilities, which an entry does not hold")
	}
	if err := common(f, c); err != nil {
		return err
	}
	mt, err := f.int("max_tokens")
	if err != nil {
		return err
	}
	mct, err := f.int("max_completion_tokens")
	if err != nil {
		return err
	}
	c.MaxTokens = mct
	if mct == nil {
		c.MaxTokens = mt
	} else if mt != nil {
		mtRaw, _ := json.Marshal(*mt)
		f.set("max_tokens", mtRaw) // both sent: the second one stays apart
	}
	if err := f.into("reasoning_effort", &c.ReasoningEffort); err != nil {
		return err
	}
	if raw := f.take("stop"); raw != nil {
		var s string
		if isString(raw) && json.Unmarshal(raw, &s) == nil {
			c.Stop = []string{s}
		} else if err := json.Unmarshal(raw, &c.Stop); err != nil {
			return notCacheable("stop")
		}
	}
	if raw := f.take("response_format"); raw != nil {
		var rf struct {
			Type       string `json:"type"`
			JSONSchema *struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Schema      json.RawMessage `json:"schema"`
				Strict      *bool           `json:"strict"`
			} `json:"json_schema"`
		}
		if err := json.Unmarshal(raw, &rf); err != nil {
			return notCacheable("response_format")
		}
		c.ResponseFormat = &RespFormat{Type: rf.Type}
		if js := rf.JSONSchema; js != nil {
			sc, err := schemaOf(js.Schema)
			if err != nil {
				return err
			}
			*c.ResponseFormat = RespFormat{Type: rf.Type, Name: js.Name, Description: js.Description, Schema: sc, Strict: js.Strict}
		}
	}
	if raw := f.take("tools"); raw != nil {
		err := memoTools(c, oaToolset, raw, func(raw json.RawMessage) ([]Tool, error) {
			tools, ok, err := oaToolsFast(raw, nil)
			if !ok {
				tools, err = oaToolsSlow(raw, nil)
			}
			return tools, err
		})
		if err != nil {
			return err
		}
	}
	if raw := f.take("messages"); raw != nil {
		var buf [4]oaMsgIn // a short conversation's stay on the stack
		msgs, ok := oaMessagesFast(raw, buf[:0])
		if !ok {
			f.decoded = nil // encoding/json matches keys wire's reading does not (textAt)
			var all []oaMsgIn
			if err := json.Unmarshal(raw, &all); err != nil {
				return notCacheable("messages")
			}
			msgs = all
		}
		for i, m := range msgs {
			parts, ok := f.textAt(i, m.Content)
			if !ok {
				var err error
				if parts, err = textOrParts(m.Content, openAIPart); err != nil {
					return err
				}
			}
			switch m.Role {
			case "system", "developer":
				addSystem(c, parts)
				continue
			case "tool":
				c.Messages = appendMsg(c.Messages, Msg{Role: "tool", CallID: m.ToolCallID, Parts: parts})
				continue
			}
			msg := Msg{Role: m.Role, Name: m.Name, Parts: parts}
			for _, x := range [...]struct {
				k   string
				raw json.RawMessage
			}{{"function_call", m.FunctionCall}, {"audio", m.Audio}} {
				k, raw := x.k, x.raw
				if isNull(raw) {
					continue
				}
				c, err := canonJSON(raw)
				if err != nil {
					return err
				}
				if msg.Extra == nil {
					msg.Extra = map[string]json.RawMessage{}
				}
				msg.Extra[k] = c
			}
			if m.Refusal != "" {
				msg.Parts = append(msg.Parts, Part{Type: "text", Text: m.Refusal})
			}
			for _, tc := range m.ToolCalls {
				msg.Calls = append(msg.Calls, Call{ID: tc.ID, Name: tc.Function.Name, Args: f.args(&tc)})
			}
			c.Messages = appendMsg(c.Messages, msg)
		}
	}
	return nil
}

// wantsLogprobs reports whether the request asks for the answer's log
// probabilities (chat: logprobs, top_logprobs; Responses: top_logprobs, or
// include naming them). An entry holds text, tool calls, the finish and
// usage (SPEC 18), so a hit would answer without them: such a request is
// not cacheable. The fields stay in place for Extra.
func wantsLogprobs(f *fieldSet) bool {
	var on bool
	if raw := f.get("logprobs"); raw != nil && json.Unmarshal(raw, &on) == nil && on {
		return true
	}
	var top float64
	if raw := f.get("top_logprobs"); raw != nil && json.Unmarshal(raw, &top) == nil && top > 0 {
		return true
	}
	var include []string
	if raw := f.get("include"); raw != nil && json.Unmarshal(raw, &include) == nil {
		return slices.Contains(include, "message.output_text.logprobs")
	}
	return false
}

// oaMsgIn is one OpenAI chat message as the key reads it.
type oaMsgIn struct {
	Role       string          `json:"role"`
	Name       string          `json:"name"`
	Content    json.RawMessage `json:"content"`
	Refusal    string          `json:"refusal"`
	ToolCalls  []oaCallIn      `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	// answer-changing fields only this format has
	FunctionCall json.RawMessage `json:"function_call"`
	Audio        json.RawMessage `json:"audio"`
}

// oaToolsSlow reads an OpenAI tools array with encoding/json (oaToolsFast
// reads the shapes clients send).
func oaToolsSlow(raw json.RawMessage, dst []Tool) ([]Tool, error) {
	return toolsSlow(raw, dst, func(ot *oaToolIn, t json.RawMessage) (Tool, error) {
		return functionTool(ot.Type == "function" && ot.Function != nil, t, func() (string, string, json.RawMessage, *bool) {
			fn := ot.Function
			return fn.Name, fn.Description, fn.Parameters, fn.Strict
		})
	})
}

// oaToolIn is one OpenAI tool as the key reads it.
type oaToolIn struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
}

// toolsSlow reads a tools array with encoding/json: each tool into a T,
// which build turns into a Tool (t is the tool's own JSON).
func toolsSlow[T any](raw json.RawMessage, dst []Tool, build func(in *T, t json.RawMessage) (Tool, error)) ([]Tool, error) {
	var tools []json.RawMessage
	if err := json.Unmarshal(raw, &tools); err != nil {
		return dst, notCacheable("tools")
	}
	for _, t := range tools {
		var in T
		if err := json.Unmarshal(t, &in); err != nil {
			return dst, notCacheable("tools")
		}
		tool, err := build(&in, t)
		if err != nil {
			return dst, err
		}
		dst = append(dst, tool)
	}
	return dst, nil
}

type oaCallIn struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
	// argsLit is the arguments as sent, a JSON string literal not yet
	// decoded (oaCallsFast; then Function.Arguments is unset): the memo
	// of canonical arguments is looked up by it (fieldSet.args).
	argsLit []byte
}

// functionTool builds a function tool, or keeps a tool of another kind raw.
func functionTool(isFunction bool, raw json.RawMessage, fn func() (name, desc string, params json.RawMessage, strict *bool)) (Tool, error) {
	if !isFunction {
		r, err := canonJSON(raw)
		return Tool{Raw: r}, err
	}
	name, desc, params, strict := fn()
	p, err := schemaOf(params)
	return Tool{Name: name, Description: desc, Params: p, Strict: strict}, err
}

// appendTexts adds parts to a system prompt, one element each: a text
// part as 't' and its text, a part of another kind as 'p' and its type and
// URL, each length-prefixed, then its text. The elements are hashed
// length-prefixed, so no text spells a block of another kind and no split
// of a block's fields spells another (systemText is the text form).
func appendTexts(dst []string, parts []Part) []string {
	for _, p := range parts {
		if p.Type == "text" {
			dst = append(dst, systemText(p.Text))
			continue
		}
		b := make([]byte, 0, 1+len(p.Type)+len(p.URL)+len(p.Text)+2*binary.MaxVarintLen64)
		b = appendStr(append(b, 'p'), p.Type)
		b = appendStr(b, p.URL)
		dst = append(dst, string(append(b, p.Text...)))
	}
	return dst
}

// systemText is a system prompt element of text s (appendTexts).
func systemText(s string) string { return "t" + s }

// oaPartIn is one OpenAI content part as the key reads it.
type oaPartIn struct {
	Type     string        `json:"type"`
	Text     string        `json:"text"`
	Refusal  string        `json:"refusal"`
	ImageURL *oaImageURLIn `json:"image_url"`
}

type oaImageURLIn struct {
	URL    string `json:"url"`
	Detail string `json:"detail"`
}

func openAIPart(elem json.RawMessage) ([]Part, error) {
	p, ok := oaPartFast(elem)
	if !ok {
		p = oaPartIn{}
		if err := json.Unmarshal(elem, &p); err != nil {
			return nil, notCacheable("content part")
		}
	}
	switch {
	case p.Type == "text":
		return []Part{{Type: "text", Text: p.Text}}, nil
	case p.Type == "refusal":
		return []Part{{Type: "text", Text: p.Refusal}}, nil
	case p.Type == "image_url" && p.ImageURL != nil:
		return []Part{{Type: "image", URL: p.ImageURL.URL, Detail: p.ImageURL.Detail}}, nil
	}
	rp, err := rawPart(elem)
	return []Part{rp}, err
}
