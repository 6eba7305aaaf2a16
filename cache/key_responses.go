package cache

// The Responses API request in canonical form; a request that continues
// stored state is not cacheable.

import (
	"encoding/json"

	"switchyard/wire"
)

func parseResponses(f fields, c *Canon) error {
	for _, k := range [...]string{"previous_response_id", "conversation"} {
		if f.get(k) != nil {
			return notCacheable(k + " continues stored state")
		}
	}
	var bg bool
	if err := f.into("background", &bg); err != nil || bg {
		return notCacheable("background mode")
	}
	if wantsLogprobs(f) {
		return notCacheable("log probabilities, which an entry does not hold")
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
		c.System = append(c.System, systemText(ins))
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
			rr, _ := json.Marshal(r)
			f.set("reasoning", rr) // the rest (summary) stays apart
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
			tr, _ := json.Marshal(t)
			f.set("text", tr)
		}
	}
	if raw := f.take("tools"); raw != nil {
		err := memoTools(c, rsToolset, raw, func(raw json.RawMessage) ([]Tool, error) {
			tools, ok, err := responsesTools.fast(raw, nil)
			if !ok {
				tools, err = rsToolsSlow(raw, nil)
			}
			return tools, err
		})
		if err != nil {
			return err
		}
	}
	if raw := f.take("input"); raw != nil {
		return responsesInput(f, raw, c)
	}
	return nil
}

func responsesInput(f *fieldSet, raw json.RawMessage, c *Canon) error {
	var s string
	if isString(raw) && json.Unmarshal(raw, &s) == nil {
		c.Messages = appendMsg(c.Messages, Msg{Role: "user", Parts: []Part{{Type: "text", Text: s}}})
		return nil
	}
	if f.items != nil {
		return responsesItems(f, f.items, c)
	}
	items, ok := rsItemsFast(raw)
	if !ok {
		items = nil
		if err := json.Unmarshal(raw, &items); err != nil {
			return notCacheable("input")
		}
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
			addMessage(c, it.Role, parts)
		case "function_call":
			c.Messages = appendMsg(c.Messages, callMsg(f, it.CallID, it.Name, it.Arguments))
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

// responsesItems is responsesInput over the wire parse's reading of the
// input array (itemsOfRequest), which holds what the body's items hold in
// the shapes wire accepts: reasoning items already dropped, a part's type
// one of wire's, an output a string. The same canonical messages.
func responsesItems(f *fieldSet, items []wire.Item, c *Canon) error {
	for i := range items {
		it := &items[i]
		switch it.Type {
		case "message":
			addMessage(c, it.Role, wireParts(it.Content))
		case "function_call":
			c.Messages = appendMsg(c.Messages, callMsg(f, it.CallID, it.Name, it.Arguments))
		case "function_call_output":
			var parts []Part
			if it.Output != "" {
				parts = []Part{{Type: "text", Text: it.Output}}
			}
			c.Messages = appendMsg(c.Messages, Msg{Role: "tool", CallID: it.CallID, Parts: parts})
		case "item_reference":
			return notCacheable("item_reference names stored state")
		default:
			return notCacheable("input item type " + it.Type)
		}
	}
	return nil
}

// wireParts is a message's parts as responsesPart reads them from the
// body, empty text parts dropped (textOrParts): wire's text, output_text
// and refusal parts are text, its input_image (which has an image_url)
// an image.
func wireParts(ps []wire.Part) []Part {
	var out []Part
	for _, p := range ps {
		switch {
		case p.Type == "input_image":
			out = append(out, Part{Type: "image", URL: p.ImageURL, Detail: p.Detail})
		case p.Text != "":
			out = append(out, Part{Type: "text", Text: p.Text})
		}
	}
	return out
}

// addMessage adds a message item of role: a system or developer message
// as addSystem does, any other as a turn of the conversation.
func addMessage(c *Canon, role string, parts []Part) {
	if role == "system" || role == "developer" {
		addSystem(c, parts)
		return
	}
	c.Messages = appendMsg(c.Messages, Msg{Role: role, Parts: parts})
}

// addSystem adds a system or developer message: to the system prompt when
// no turn came before it (what every format spells alike), else as a
// system turn where it stands, since an upstream that reads it there
// answers otherwise than with it at the start (the formats that can send
// one there, OpenAI chat and Responses, then share its key).
func addSystem(c *Canon, parts []Part) {
	if len(c.Messages) == 0 {
		c.System = appendTexts(c.System, parts)
		return
	}
	c.Messages = appendMsg(c.Messages, Msg{Role: "system", Parts: parts})
}

// callMsg is the assistant turn of a function_call item, its arguments
// canonical through the team's memo.
func callMsg(f *fieldSet, id, name, args string) Msg {
	return Msg{Role: "assistant", Calls: []Call{{ID: id, Name: name, Args: remembered(f, 'r', args, func() (string, bool) { return canonArgs(args), true })}}}
}

func responsesPart(elem json.RawMessage) ([]Part, error) {
	p, ok := rsPartFast(elem)
	if !ok {
		p = rsPartIn{}
		if err := json.Unmarshal(elem, &p); err != nil {
			return nil, notCacheable("content part")
		}
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

// rsToolsSlow reads a Responses tools array with encoding/json (responsesTools.fast
// reads the shapes clients send).
func rsToolsSlow(raw json.RawMessage, dst []Tool) ([]Tool, error) {
	return toolsSlow(raw, dst, func(rt *rsToolIn, t json.RawMessage) (Tool, error) {
		return responsesTools.tool(&flatTool{Type: rt.Type, Name: rt.Name, Description: rt.Description, Schema: rt.Parameters, Strict: rt.Strict}, t)
	})
}

// rsToolIn is one Responses tool as the key reads it.
type rsToolIn struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// rsItemIn is one Responses input item as the key reads it.
type rsItemIn struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// rsPartIn is one Responses content part as the key reads it.
type rsPartIn struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	Detail   string `json:"detail"`
}
