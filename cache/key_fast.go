package cache

// Fast readers for the parts of an OpenAI chat request an agent sends on
// every turn: its messages (tool calls included) and its tools. Each reads
// a span of a body wire.Parse validated the way json.Unmarshal into the
// slow path's types does, without reflection, for the shapes clients
// send: objects whose members are spelled exactly and once, values of the
// expected JSON type. ok is false for anything else (a key with an escape,
// in another case or given twice, a type json.Unmarshal would reject) and
// the caller decodes with encoding/json, so both paths agree by
// construction (the Fuzz*Fast tests, FuzzKey). The messages arrays, most
// of a turn's bytes after the tools (which the memo keeps), are read in
// one pass with a trusted jsonspan.Cursor (the body was validated once,
// so values are measured, not validated again); the other objects are
// walked with wire.EachField, the wire package's fast readers' own walk.

import (
	"encoding/json"

	"switchyard/internal/jsonspan"
	"switchyard/wire"
)

// fastString reads a string field's value into *p: a string, or null
// (which leaves *p as it is); false for any other type.
func fastString(v []byte, p *string) bool {
	switch {
	case v[0] == '"':
		*p = wire.DecodeString(v)
	case string(v) != "null":
		return false
	}
	return true
}

// fastBool reads a *bool field's value: true, false or null (nil).
func fastBool(v []byte, p **bool) bool {
	switch string(v) {
	case "true", "false":
		b := v[0] == 't'
		*p = &b
	case "null":
		*p = nil
	default:
		return false
	}
	return true
}

var (
	oaToolNames     = []string{"type", "function"}
	oaFunctionNames = []string{"name", "description", "parameters", "strict"}
	oaCallNames     = []string{"id", "function"}
	oaCallFnNames   = []string{"name", "arguments"}
	oaMsgNames      = []string{"role", "name", "content", "refusal", "tool_calls", "tool_call_id", "function_call", "audio"}
)

// oaToolsFast reads an OpenAI tools array as oaToolsSlow does. err is set only
// with ok: a tool that reads but has no canonical form.
func oaToolsFast(raw json.RawMessage, dst []Tool) (tools []Tool, ok bool, err error) {
	ok = wire.EachElement(raw, func(t []byte) bool {
		var typ string
		var fn []byte // the function object's span; nil when absent or null
		if !wire.EachField(t, oaToolNames, func(i int, v []byte) bool {
			if i == 0 {
				return fastString(v, &typ)
			}
			switch v[0] {
			case '{':
				fn = v
			case 'n':
				fn = nil
			default:
				return false
			}
			return true
		}) {
			return false
		}
		var name, desc string
		var params json.RawMessage
		var strict *bool
		if fn != nil && !wire.EachField(fn, oaFunctionNames, func(i int, v []byte) bool {
			switch i {
			case 0:
				return fastString(v, &name)
			case 1:
				return fastString(v, &desc)
			case 2:
				params = v
				return true
			}
			return fastBool(v, &strict)
		}) {
			return false
		}
		var tool Tool
		tool, err = functionTool(typ == "function" && fn != nil, t, func() (string, string, json.RawMessage, *bool) {
			return name, desc, params, strict
		})
		if err != nil {
			return false
		}
		dst = append(dst, tool)
		return true
	})
	if err != nil {
		return dst, true, err
	}
	return dst, ok, nil
}

// oaCallsFast reads a message's tool_calls array as json.Unmarshal into
// []oaCallIn does (null: none), with the cursor at it.
func oaCallsFast(c *jsonspan.Cursor) (calls []oaCallIn, ok bool) {
	if c.Null() {
		return nil, true
	}
	ok = c.Array(func() bool {
		var call oaCallIn
		var seen members
		if !c.Object(func(k []byte) bool {
			switch exactMember(k, oaCallNames...) {
			case "id":
				return seen.first(1) && stringNext(c, &call.ID)
			case "function":
				// null leaves the function as it is, as encoding/json does
				return seen.first(2) && (c.Null() || oaFunctionFast(c, &call))
			case "":
				return skipValue(c)
			}
			return false
		}) {
			return false
		}
		calls = append(calls, call)
		return true
	})
	return calls, ok
}

// oaFunctionFast reads a tool call's function object (name and arguments,
// each at most once) into call.
func oaFunctionFast(c *jsonspan.Cursor, call *oaCallIn) bool {
	var seen members
	return c.Object(func(k []byte) bool {
		switch exactMember(k, oaCallFnNames...) {
		case "name":
			return seen.first(1) && stringNext(c, &call.Function.Name)
		case "arguments":
			// kept as sent, decoded only when the memo does not know it
			// (fieldSet.args); null leaves the arguments as they are
			if !seen.first(2) {
				return false
			}
			v, ok := c.Value()
			switch {
			case !ok:
				return false
			case v[0] == '"':
				call.argsLit = v
			case string(v) != "null":
				return false
			}
			return true
		case "":
			return skipValue(c)
		}
		return false
	})
}

// oaMessagesFast reads the messages array as json.Unmarshal into
// []oaMsgIn does, in one pass (jsonspan.Cursor): every member a message
// reads is met at most once and spelled exactly, strings are strings or
// null; anything else is left to encoding/json.
func oaMessagesFast(raw json.RawMessage, dst []oaMsgIn) (msgs []oaMsgIn, ok bool) {
	c := jsonspan.NewTrustedCursor(raw) // a span of a validated body
	ok = c.Array(func() bool {
		var m oaMsgIn
		var seen members
		if !c.Object(func(k []byte) bool {
			i, ok := fieldOf(&c, k, oaMsgNames, &seen)
			if i < 0 || !ok {
				return ok
			}
			switch i {
			case 0:
				return stringNext(&c, &m.Role)
			case 1:
				return stringNext(&c, &m.Name)
			case 2:
				m.Content, ok = c.Value()
			case 3:
				return stringNext(&c, &m.Refusal)
			case 4:
				m.ToolCalls, ok = oaCallsFast(&c)
			case 5:
				return stringNext(&c, &m.ToolCallID)
			case 6:
				m.FunctionCall, ok = c.Value()
			case 7:
				m.Audio, ok = c.Value()
			}
			return ok
		}) {
			return false
		}
		dst = append(dst, m)
		return true
	})
	return dst, ok && c.End()
}

var (
	anMsgNames    = []string{"role", "content"}
	anBlockNames  = []string{"type", "text", "source", "id", "name", "input", "tool_use_id", "content", "is_error"}
	anSourceNames = []string{"type", "media_type", "data", "url"}
)

// anMessagesFast reads an Anthropic messages array as json.Unmarshal into
// []anMsgIn does, in one pass (jsonspan.Cursor): a content that is an
// array of blocks is read where it stands into blocks, each
// block as anBlockFast reads it, so the caller need not walk it again.
func anMessagesFast(raw json.RawMessage) (msgs []anMsgIn, ok bool) {
	c := jsonspan.NewTrustedCursor(raw) // a span of a validated body
	ok = c.Array(func() bool {
		var m anMsgIn
		var seen members
		if !c.Object(func(k []byte) bool {
			switch exactMember(k, anMsgNames...) {
			case "role":
				return seen.first(1) && stringNext(&c, &m.Role)
			case "content":
				if !seen.first(2) {
					return false
				}
				if c.Peek() != '[' {
					var ok bool
					m.Content, ok = c.Value()
					return ok
				}
				var ok bool
				m.Content, ok = c.Span(func() bool {
					return c.Array(func() bool {
						b, ok := anBlockNext(&c)
						m.blocks = append(m.blocks, b)
						return ok
					})
				})
				return ok
			case "":
				return skipValue(&c)
			}
			return false
		}) {
			return false
		}
		msgs = append(msgs, m)
		return true
	})
	return msgs, ok && c.End()
}

// anBlockFast reads one content block as json.Unmarshal into anBlockIn
// does (anBlockNext over the whole of elem).
func anBlockFast(elem []byte) (b anBlockIn, ok bool) {
	c := jsonspan.NewTrustedCursor(elem) // a span of a validated body
	b, ok = anBlockNext(&c)
	b.raw = nil // elem itself: the caller has it
	return b, ok && c.End()
}

// anBlockNext reads the content block at the cursor as json.Unmarshal into
// anBlockIn does, for blocks whose members are spelled exactly and given
// once, strings or null where the struct has strings; raw is the block's
// bytes.
func anBlockNext(c *jsonspan.Cursor) (b anBlockIn, ok bool) {
	var seen members
	b.raw, ok = c.Span(func() bool {
		return c.Object(func(k []byte) bool {
			i, ok := fieldOf(c, k, anBlockNames, &seen)
			if i < 0 || !ok {
				return ok
			}
			switch i {
			case 0:
				return stringNext(c, &b.Type)
			case 1:
				return stringNext(c, &b.Text)
			case 2:
				if c.Null() {
					return true
				}
				b.Source = &anBlockSource{}
				return c.Peek() == '{' && stringFields(c, anSourceNames, &b.Source.Type, &b.Source.MediaType, &b.Source.Data, &b.Source.URL)
			case 3:
				return stringNext(c, &b.ID)
			case 4:
				return stringNext(c, &b.Name)
			case 5:
				b.Input, ok = c.Value()
			case 6:
				return stringNext(c, &b.ToolUseID)
			case 7:
				b.Content, ok = c.Value()
			case 8:
				var v []byte
				if v, ok = c.Value(); ok {
					switch string(v) {
					case "true":
						b.IsError = true
					case "false", "null":
					default:
						return false
					}
				}
			}
			return ok
		})
	})
	return b, ok
}

var (
	oaPartNames     = []string{"type", "text", "refusal", "image_url"}
	oaImageURLNames = []string{"url", "detail"}
	rsItemNames     = []string{"type", "role", "content", "call_id", "name", "arguments", "output"}
	rsPartNames     = []string{"type", "text", "refusal", "image_url", "detail"}
)

// oaPartFast reads one OpenAI content part as json.Unmarshal into
// oaPartIn does.
func oaPartFast(elem []byte) (p oaPartIn, ok bool) {
	ok = wire.EachField(elem, oaPartNames, func(i int, v []byte) bool {
		switch i {
		case 0:
			return fastString(v, &p.Type)
		case 1:
			return fastString(v, &p.Text)
		case 2:
			return fastString(v, &p.Refusal)
		}
		if string(v) == "null" {
			return true
		}
		p.ImageURL = &oaImageURLIn{}
		return v[0] == '{' && wire.EachField(v, oaImageURLNames, func(j int, uv []byte) bool {
			if j == 0 {
				return fastString(uv, &p.ImageURL.URL)
			}
			return fastString(uv, &p.ImageURL.Detail)
		})
	})
	return p, ok
}

// rsItemsFast reads a Responses input array as json.Unmarshal into
// []rsItemIn does.
func rsItemsFast(raw json.RawMessage) (items []rsItemIn, ok bool) {
	ok = wire.EachElement(raw, func(e []byte) bool {
		var it rsItemIn
		if !wire.EachField(e, rsItemNames, func(i int, v []byte) bool {
			switch i {
			case 0:
				return fastString(v, &it.Type)
			case 1:
				return fastString(v, &it.Role)
			case 2:
				it.Content = v
			case 3:
				return fastString(v, &it.CallID)
			case 4:
				return fastString(v, &it.Name)
			case 5:
				return fastString(v, &it.Arguments)
			case 6:
				it.Output = v
			}
			return true
		}) {
			return false
		}
		items = append(items, it)
		return true
	})
	return items, ok
}

// rsPartFast reads one Responses content part as json.Unmarshal into
// rsPartIn does.
func rsPartFast(elem []byte) (p rsPartIn, ok bool) {
	ok = wire.EachField(elem, rsPartNames, func(i int, v []byte) bool {
		return fastString(v, [...]*string{&p.Type, &p.Text, &p.Refusal, &p.ImageURL, &p.Detail}[i])
	})
	return p, ok
}

// flatTool is a tool whose fields sit at its top level (Anthropic,
// Responses), as the key reads it. The formats differ in the schema's name
// and in which type is a function tool.
type flatTool struct {
	Type, Name, Description string
	Schema                  json.RawMessage
	Strict                  *bool
}

// flatTools is one format's flat tools.
type flatTools struct {
	names    []string          // type, name, description, the schema, strict
	function func(string) bool // whether a tool of this type is a function tool
}

var (
	anthropicTools = &flatTools{names: []string{"type", "name", "description", "input_schema", "strict"},
		function: func(typ string) bool { return typ == "" || typ == "custom" }}
	responsesTools = &flatTools{names: []string{"type", "name", "description", "parameters", "strict"},
		function: func(typ string) bool { return typ == "function" }}
)

// tool is the canonical tool: a function tool's fields, any other kind
// (a server tool, a built-in one) raw.
func (f *flatTools) tool(t *flatTool, raw json.RawMessage) (Tool, error) {
	return functionTool(f.function(t.Type), raw, func() (string, string, json.RawMessage, *bool) {
		return t.Name, t.Description, t.Schema, t.Strict
	})
}

// fast reads a tools array of the format as json.Unmarshal into the
// format's tool type does (anToolsSlow, rsToolsSlow). err is set only
// with ok: a tool that reads but has no canonical form.
func (f *flatTools) fast(raw json.RawMessage, dst []Tool) (tools []Tool, ok bool, err error) {
	ok = wire.EachElement(raw, func(t []byte) bool {
		var ft flatTool
		if !wire.EachField(t, f.names, func(i int, v []byte) bool {
			switch i {
			case 0:
				return fastString(v, &ft.Type)
			case 1:
				return fastString(v, &ft.Name)
			case 2:
				return fastString(v, &ft.Description)
			case 3:
				ft.Schema = v
				return true
			}
			return fastBool(v, &ft.Strict)
		}) {
			return false
		}
		var tool Tool
		if tool, err = f.tool(&ft, t); err != nil {
			return false
		}
		dst = append(dst, tool)
		return true
	})
	if err != nil {
		return dst, true, err
	}
	return dst, ok, nil
}
