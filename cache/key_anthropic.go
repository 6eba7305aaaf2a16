package cache

// The Anthropic Messages request in canonical form.

import "encoding/json"

func parseAnthropic(f fields, c *Canon) error {
	// disable_parallel_tool_use lives in tool_choice: it is the chat
	// formats' parallel_tool_calls, negated
	if raw := f.get("tool_choice"); raw != nil {
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
		parts, err := textOrParts(raw, anthropicBlock(f, nil))
		if err != nil {
			return err
		}
		c.System = appendTexts(c.System, parts)
	}
	if raw := f.take("tools"); raw != nil {
		err := memoTools(c, anToolset, raw, func(raw json.RawMessage) ([]Tool, error) {
			tools, ok, err := anthropicTools.fast(raw, nil)
			if !ok {
				tools, err = anToolsSlow(raw, nil)
			}
			return tools, err
		})
		if err != nil {
			return err
		}
	}
	if raw := f.take("messages"); raw != nil {
		msgs, ok := anMessagesFast(raw)
		if !ok {
			f.decoded = nil // encoding/json matches keys wire's reading does not (textAt)
			if err := json.Unmarshal(raw, &msgs); err != nil {
				return notCacheable("messages")
			}
		}
		for i, m := range msgs {
			// tool results become tool turns ahead of the rest of the
			// user turn, as OpenAI and Responses spell them
			var results []Msg
			parts, ok := f.textAt(i, m.Content)
			if !ok {
				var err error
				if m.blocks != nil {
					parts, err = blockParts(f, &results, m.blocks)
				} else {
					parts, err = textOrParts(m.Content, anthropicBlock(f, &results))
				}
				if err != nil {
					return err
				}
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
func anthropicBlock(f *fieldSet, results *[]Msg) func(json.RawMessage) ([]Part, error) {
	return func(elem json.RawMessage) ([]Part, error) {
		b, ok := anBlockFast(elem)
		if !ok {
			b = anBlockIn{}
			if err := json.Unmarshal(elem, &b); err != nil {
				return nil, notCacheable("content block")
			}
		}
		return anthropicBlockParts(f, results, &b, elem)
	}
}

// blockParts is textOrParts of a content whose blocks anMessagesFast read
// in place: each block mapped as anthropicBlock maps it, empty text parts
// dropped.
func blockParts(f *fieldSet, results *[]Msg, blocks []anBlockIn) ([]Part, error) {
	var out []Part
	for i := range blocks {
		ps, err := anthropicBlockParts(f, results, &blocks[i], blocks[i].raw)
		if err != nil {
			return nil, err
		}
		out = appendParts(out, ps)
	}
	return out, nil
}

// anthropicBlockParts maps the block b read from elem (anthropicBlock).
func anthropicBlockParts(f *fieldSet, results *[]Msg, b *anBlockIn, elem json.RawMessage) ([]Part, error) {
	switch {
	case b.Type == "text":
		return []Part{{Type: "text", Text: b.Text}}, nil
	case b.Type == "image" && b.Source != nil && b.Source.Type == "base64":
		return []Part{{Type: "image", URL: "data:" + b.Source.MediaType + ";base64," + b.Source.Data}}, nil
	case b.Type == "image" && b.Source != nil && b.Source.Type == "url":
		return []Part{{Type: "image", URL: b.Source.URL}}, nil
	case b.Type == "tool_use":
		var err error
		args := remembered(f, 'a', b.Input, func() (string, bool) {
			var c json.RawMessage
			if c, err = canonJSON(b.Input); err != nil {
				return "", false
			}
			if c == nil {
				return "{}", true
			}
			return string(c), true
		})
		if err != nil {
			return nil, err
		}
		return []Part{{Type: "tool_use", Detail: b.ID, URL: b.Name, Text: args}}, nil
	case b.Type == "tool_result" && results != nil:
		parts, err := textOrParts(b.Content, anthropicBlock(f, nil))
		if err != nil {
			return nil, err
		}
		*results = append(*results, Msg{Role: "tool", CallID: b.ToolUseID, Parts: parts, IsError: b.IsError})
		return nil, nil
	}
	rp, err := rawPart(elem)
	return []Part{rp}, err
}

// anToolsSlow reads an Anthropic tools array with encoding/json
// (anthropicTools.fast reads the shapes clients send).
func anToolsSlow(raw json.RawMessage, dst []Tool) ([]Tool, error) {
	return toolsSlow(raw, dst, func(at *anToolIn, t json.RawMessage) (Tool, error) {
		return anthropicTools.tool(&flatTool{Type: at.Type, Name: at.Name, Description: at.Description, Schema: at.InputSchema, Strict: at.Strict}, t)
	})
}

// anToolIn is one Anthropic tool as the key reads it.
type anToolIn struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Strict      *bool           `json:"strict"`
}

// anMsgIn is one Anthropic message as the key reads it.
type anMsgIn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// blocks is Content's blocks when anMessagesFast read them where they
	// stand (nil for an empty array, which there is nothing to walk of);
	// encoding/json leaves it unset
	blocks []anBlockIn
}

// anBlockIn is one Anthropic content block as the key reads it.
type anBlockIn struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Source    *anBlockSource  `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	raw       []byte          // the block as sent, when read in place (anBlockNext)
}

type anBlockSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}
