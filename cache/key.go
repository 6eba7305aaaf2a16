package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"

	"switchyard/catalog"
	"switchyard/wire"
)

// Key is the SHA-256 of an entry's scope and canonical request (SPEC 18).
type Key [32]byte

// String is the key in hex, as it appears in a Redis key name.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// keyVersion starts every hashed input: changing the canonical form bumps
// it, so old entries are simply never found again.
const keyVersion = "switchyard-cache-v1"

// Parse reduces a request body to its canonical form. It returns an error
// wrapping ErrNotCacheable for a request the cache must not answer (SPEC
// 18: images never, n > 1 never, Responses only without
// previous_response_id) or whose fields do not parse; the gateway then
// serves it without the cache (and without a cache header).
func Parse(op catalog.Operation, format wire.Format, body []byte) (*Canon, error) {
	f, err := decodeFields(body)
	if err != nil {
		return nil, err
	}
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
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, s := range [...]string{keyVersion, team, tier} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	body, _ := json.Marshal(c) // a Canon always marshals: its raw fields are canonical JSON
	h.Write(body)
	var k Key
	h.Sum(k[:0])
	return k
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
		if json.Unmarshal(raw, &s) == nil {
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
	if err := common(f, c); err != nil {
		return err
	}
	var mt, mct *int64
	if err := f.into("max_tokens", &mt); err != nil {
		return err
	}
	if err := f.into("max_completion_tokens", &mct); err != nil {
		return err
	}
	c.MaxTokens = mct
	if mct == nil {
		c.MaxTokens = mt
	} else if mt != nil {
		f["max_tokens"], _ = json.Marshal(*mt) // both sent: the second one stays apart
	}
	if err := f.into("reasoning_effort", &c.ReasoningEffort); err != nil {
		return err
	}
	if raw := f.take("stop"); raw != nil {
		var s string
		if json.Unmarshal(raw, &s) == nil {
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
		var tools []json.RawMessage
		if err := json.Unmarshal(raw, &tools); err != nil {
			return notCacheable("tools")
		}
		for _, t := range tools {
			var ot struct {
				Type     string `json:"type"`
				Function *struct {
					Name        string          `json:"name"`
					Description string          `json:"description"`
					Parameters  json.RawMessage `json:"parameters"`
					Strict      *bool           `json:"strict"`
				} `json:"function"`
			}
			if err := json.Unmarshal(t, &ot); err != nil {
				return notCacheable("tools")
			}
			tool, err := functionTool(ot.Type == "function" && ot.Function != nil, t, func() (string, string, json.RawMessage, *bool) {
				fn := ot.Function
				return fn.Name, fn.Description, fn.Parameters, fn.Strict
			})
			if err != nil {
				return err
			}
			c.Tools = append(c.Tools, tool)
		}
	}
	if raw := f.take("messages"); raw != nil {
		var msgs []struct {
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
		if err := json.Unmarshal(raw, &msgs); err != nil {
			return notCacheable("messages")
		}
		for _, m := range msgs {
			parts, err := textOrParts(m.Content, openAIPart)
			if err != nil {
				return err
			}
			switch m.Role {
			case "system", "developer":
				c.System = appendTexts(c.System, parts)
				continue
			case "tool":
				c.Messages = appendMsg(c.Messages, Msg{Role: "tool", CallID: m.ToolCallID, Parts: parts})
				continue
			}
			msg := Msg{Role: m.Role, Name: m.Name, Parts: parts}
			for k, raw := range map[string]json.RawMessage{"function_call": m.FunctionCall, "audio": m.Audio} {
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
				msg.Calls = append(msg.Calls, Call{ID: tc.ID, Name: tc.Function.Name, Args: canonArgs(tc.Function.Arguments)})
			}
			c.Messages = appendMsg(c.Messages, msg)
		}
	}
	return nil
}

type oaCallIn struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
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

func appendTexts(dst []string, parts []Part) []string {
	for _, p := range parts {
		if p.Type == "text" {
			dst = append(dst, p.Text)
		} else {
			dst = append(dst, p.Type+":"+p.URL+p.Text)
		}
	}
	return dst
}

func openAIPart(elem json.RawMessage) ([]Part, error) {
	var p struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Refusal  string `json:"refusal"`
		ImageURL *struct {
			URL    string `json:"url"`
			Detail string `json:"detail"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(elem, &p); err != nil {
		return nil, notCacheable("content part")
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

func parseAnthropic(f fields, c *Canon) error {
	// disable_parallel_tool_use lives in tool_choice: it is the chat
	// formats' parallel_tool_calls, negated
	if raw := f["tool_choice"]; raw != nil {
		var tc struct {
			Disable *bool `json:"disable_parallel_tool_use"`
		}
		if json.Unmarshal(raw, &tc) == nil && tc.Disable != nil {
			v := !*tc.Disable
			c.ParallelToolCalls = &v
		}
	}
	if err := common(f, c); err != nil {
		return err
	}
	if err := f.into("max_tokens", &c.MaxTokens); err != nil {
		return err
	}
	if err := f.into("stop_sequences", &c.Stop); err != nil {
		return err
	}
	if raw := f.take("system"); raw != nil {
		parts, err := textOrParts(raw, anthropicBlock(nil))
		if err != nil {
			return err
		}
		c.System = appendTexts(c.System, parts)
	}
	if raw := f.take("tools"); raw != nil {
		var tools []json.RawMessage
		if err := json.Unmarshal(raw, &tools); err != nil {
			return notCacheable("tools")
		}
		for _, t := range tools {
			var at struct {
				Type        string          `json:"type"`
				Name        string          `json:"name"`
				Description string          `json:"description"`
				InputSchema json.RawMessage `json:"input_schema"`
				Strict      *bool           `json:"strict"`
			}
			if err := json.Unmarshal(t, &at); err != nil {
				return notCacheable("tools")
			}
			tool, err := functionTool(at.Type == "" || at.Type == "custom", t, func() (string, string, json.RawMessage, *bool) {
				return at.Name, at.Description, at.InputSchema, at.Strict
			})
			if err != nil {
				return err
			}
			c.Tools = append(c.Tools, tool)
		}
	}
	if raw := f.take("messages"); raw != nil {
		var msgs []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(raw, &msgs); err != nil {
			return notCacheable("messages")
		}
		for _, m := range msgs {
			// tool results become tool turns ahead of the rest of the
			// user turn, as OpenAI and Responses spell them
			var results []Msg
			parts, err := textOrParts(m.Content, anthropicBlock(&results))
			if err != nil {
				return err
			}
			var calls []Call
			kept := parts[:0]
			for _, p := range parts {
				if p.Type == "tool_use" {
					calls = append(calls, Call{ID: p.Detail, Name: p.URL, Args: p.Text})
					continue
				}
				kept = append(kept, p)
			}
			for _, r := range results {
				c.Messages = appendMsg(c.Messages, r)
			}
			c.Messages = appendMsg(c.Messages, Msg{Role: m.Role, Parts: kept, Calls: calls})
		}
	}
	return nil
}

// anthropicBlock maps one content block. tool_use comes back as a part of
// type tool_use (Detail id, URL name, Text arguments) that the caller moves
// to the turn's calls; tool_result blocks go to results.
func anthropicBlock(results *[]Msg) func(json.RawMessage) ([]Part, error) {
	return func(elem json.RawMessage) ([]Part, error) {
		var b struct {
			Type   string `json:"type"`
			Text   string `json:"text"`
			Source *struct {
				Type      string `json:"type"`
				MediaType string `json:"media_type"`
				Data      string `json:"data"`
				URL       string `json:"url"`
			} `json:"source"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error"`
		}
		if err := json.Unmarshal(elem, &b); err != nil {
			return nil, notCacheable("content block")
		}
		switch {
		case b.Type == "text":
			return []Part{{Type: "text", Text: b.Text}}, nil
		case b.Type == "image" && b.Source != nil && b.Source.Type == "base64":
			return []Part{{Type: "image", URL: "data:" + b.Source.MediaType + ";base64," + b.Source.Data}}, nil
		case b.Type == "image" && b.Source != nil && b.Source.Type == "url":
			return []Part{{Type: "image", URL: b.Source.URL}}, nil
		case b.Type == "tool_use":
			args, err := canonJSON(b.Input)
			if err != nil {
				return nil, err
			}
			if args == nil {
				args = json.RawMessage("{}")
			}
			return []Part{{Type: "tool_use", Detail: b.ID, URL: b.Name, Text: string(args)}}, nil
		case b.Type == "tool_result" && results != nil:
			parts, err := textOrParts(b.Content, anthropicBlock(nil))
			if err != nil {
				return nil, err
			}
			*results = append(*results, Msg{Role: "tool", CallID: b.ToolUseID, Parts: parts, IsError: b.IsError})
			return nil, nil
		}
		rp, err := rawPart(elem)
		return []Part{rp}, err
	}
}

func parseResponses(f fields, c *Canon) error {
	for _, k := range [...]string{"previous_response_id", "conversation"} {
		if f[k] != nil {
			return notCacheable(k + " continues stored state")
		}
	}
	var bg bool
	if err := f.into("background", &bg); err != nil || bg {
		return notCacheable("background mode")
	}
	if err := common(f, c); err != nil {
		return err
	}
	if err := f.into("max_output_tokens", &c.MaxTokens); err != nil {
		return err
	}
	var ins string
	if err := f.into("instructions", &ins); err != nil {
		return err
	}
	if ins != "" {
		c.System = append(c.System, ins)
	}
	if raw := f.take("reasoning"); raw != nil {
		var r map[string]json.RawMessage
		if err := json.Unmarshal(raw, &r); err != nil {
			return notCacheable("reasoning")
		}
		if e := r["effort"]; !isNull(e) {
			if err := json.Unmarshal(e, &c.ReasoningEffort); err != nil {
				return notCacheable("reasoning.effort")
			}
		}
		delete(r, "effort")
		if len(r) > 0 {
			f["reasoning"], _ = json.Marshal(r) // the rest (summary) stays apart
		}
	}
	if raw := f.take("text"); raw != nil {
		var t map[string]json.RawMessage
		if err := json.Unmarshal(raw, &t); err != nil {
			return notCacheable("text")
		}
		if v := t["verbosity"]; !isNull(v) {
			if err := json.Unmarshal(v, &c.Verbosity); err != nil {
				return notCacheable("text.verbosity")
			}
		}
		if fm := t["format"]; !isNull(fm) {
			var rf RespFormat
			if err := json.Unmarshal(fm, &rf); err != nil {
				return notCacheable("text.format")
			}
			sc, err := schemaOf(rf.Schema)
			if err != nil {
				return err
			}
			rf.Schema = sc
			c.ResponseFormat = &rf
		}
		delete(t, "verbosity")
		delete(t, "format")
		if len(t) > 0 {
			f["text"], _ = json.Marshal(t)
		}
	}
	if raw := f.take("tools"); raw != nil {
		var tools []json.RawMessage
		if err := json.Unmarshal(raw, &tools); err != nil {
			return notCacheable("tools")
		}
		for _, t := range tools {
			var rt struct {
				Type        string          `json:"type"`
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
				Strict      *bool           `json:"strict"`
			}
			if err := json.Unmarshal(t, &rt); err != nil {
				return notCacheable("tools")
			}
			tool, err := functionTool(rt.Type == "function", t, func() (string, string, json.RawMessage, *bool) {
				return rt.Name, rt.Description, rt.Parameters, rt.Strict
			})
			if err != nil {
				return err
			}
			c.Tools = append(c.Tools, tool)
		}
	}
	if raw := f.take("input"); raw != nil {
		return responsesInput(raw, c)
	}
	return nil
}

func responsesInput(raw json.RawMessage, c *Canon) error {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		c.Messages = appendMsg(c.Messages, Msg{Role: "user", Parts: []Part{{Type: "text", Text: s}}})
		return nil
	}
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		CallID    string          `json:"call_id"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		Output    json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return notCacheable("input")
	}
	for _, it := range items {
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			parts, err := textOrParts(it.Content, responsesPart)
			if err != nil {
				return err
			}
			if it.Role == "system" || it.Role == "developer" {
				c.System = appendTexts(c.System, parts)
				continue
			}
			c.Messages = appendMsg(c.Messages, Msg{Role: it.Role, Parts: parts})
		case "function_call":
			c.Messages = appendMsg(c.Messages, Msg{Role: "assistant", Calls: []Call{{ID: it.CallID, Name: it.Name, Args: canonArgs(it.Arguments)}}})
		case "function_call_output":
			parts, err := textOrParts(it.Output, responsesPart)
			if err != nil {
				return err
			}
			c.Messages = appendMsg(c.Messages, Msg{Role: "tool", CallID: it.CallID, Parts: parts})
		case "reasoning":
			// dropped, as the gateway drops it on the way upstream (wire)
		case "item_reference":
			return notCacheable("item_reference names stored state")
		default:
			return notCacheable("input item type " + typ)
		}
	}
	return nil
}

func responsesPart(elem json.RawMessage) ([]Part, error) {
	var p struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Refusal  string `json:"refusal"`
		ImageURL string `json:"image_url"`
		Detail   string `json:"detail"`
	}
	if err := json.Unmarshal(elem, &p); err != nil {
		return nil, notCacheable("content part")
	}
	switch p.Type {
	case "input_text", "output_text", "text":
		return []Part{{Type: "text", Text: p.Text}}, nil
	case "refusal":
		return []Part{{Type: "text", Text: p.Refusal}}, nil
	case "input_image":
		if p.ImageURL != "" {
			return []Part{{Type: "image", URL: p.ImageURL, Detail: p.Detail}}, nil
		}
	}
	rp, err := rawPart(elem)
	return []Part{rp}, err
}
