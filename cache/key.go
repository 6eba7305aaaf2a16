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
