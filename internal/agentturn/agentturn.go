// Package agentturn builds the request a coding agent sends on one turn,
// for benchmarks: the agent's tools with their parameter schemas and the
// conversation so far, tool calls and their results included. An agent
// sends all of it again on every turn, which makes it the largest request
// a gateway and its response cache see over and over.
package agentturn

import (
	"fmt"
	"strings"
)

// Schema is one tool's parameter schema (about 1.3 KB), shaped like an
// editing tool's.
const Schema = `{"type":"object","properties":{"file_path":{"type":"string","description":"The absolute path to the file to modify"},"old_string":{"type":"string","description":"The text to replace"},"new_string":{"type":"string","description":"The text to replace it with (must be different from old_string)"},"replace_all":{"type":"boolean","default":false,"description":"Replace all occurences of old_string (default false)"},"edits":{"type":"array","items":{"type":"object","properties":{"old_string":{"type":"string"},"new_string":{"type":"string"},"line_hint":{"type":"integer","minimum":1}},"required":["old_string","new_string"],"additionalProperties":false},"minItems":1,"description":"Several edits applied in order, each to the result of the one before"},"encoding":{"type":"string","enum":["utf-8","latin-1","utf-16"],"description":"How the file's bytes are read and written"},"timeout_ms":{"type":"number","exclusiveMinimum":0,"maximum":600000}},"required":["file_path","old_string","new_string"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`

// OpenAI is the turn as an OpenAI chat request (about 36 KB): 20 tools
// with Schema as parameters, and 12 earlier turns of an assistant's tool
// call and its result.
func OpenAI() string { return build(openAIFormat) }

// Anthropic is the same turn as an Anthropic Messages request.
func Anthropic() string { return build(anthropicFormat) }

// Responses is the same turn as an OpenAI Responses request (input items:
// messages, function calls and their outputs), as Codex-style agents send it.
func Responses() string { return build(responsesFormat) }

type format int

const (
	openAIFormat format = iota
	anthropicFormat
	responsesFormat
)

func build(f format) string {
	var b strings.Builder
	if f == responsesFormat {
		b.WriteString(`{"model":"m","max_output_tokens":4096,"tools":[`)
	} else {
		b.WriteString(`{"model":"m","max_tokens":4096,"tools":[`)
	}
	for i := range 20 {
		if i > 0 {
			b.WriteByte(',')
		}
		switch f {
		case responsesFormat:
			fmt.Fprintf(&b, `{"type":"function","name":"tool_%d","description":"Tool number %d of the agent","parameters":%s}`, i, i, Schema)
		case anthropicFormat:
			fmt.Fprintf(&b, `{"name":"tool_%d","description":"Tool number %d of the agent","input_schema":%s}`, i, i, Schema)
		default:
			fmt.Fprintf(&b, `{"type":"function","function":{"name":"tool_%d","description":"Tool number %d of the agent","parameters":%s}}`, i, i, Schema)
		}
	}
	if f == responsesFormat {
		b.WriteString(`],"input":[{"role":"user","content":[{"type":"input_text","text":"Fix the failing test in pkg/server and explain the change."}]}`)
	} else {
		b.WriteString(`],"messages":[{"role":"user","content":"Fix the failing test in pkg/server and explain the change."}`)
	}
	result := strings.Repeat(`line of a file the tool read, with \"quotes\" and a tab\t`, 12)
	for i := range 12 {
		args := fmt.Sprintf(`{"file_path":"/src/pkg/server/file_%d.go","old_string":"return nil","new_string":"return err","replace_all":false}`, i)
		switch f {
		case responsesFormat:
			fmt.Fprintf(&b, `,{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Reading file %d."}]}`, i)
			fmt.Fprintf(&b, `,{"type":"function_call","call_id":"call_%d","name":"tool_%d","arguments":%q}`, i, i%20, args)
			fmt.Fprintf(&b, `,{"type":"function_call_output","call_id":"call_%d","output":"%s"}`, i, result)
		case anthropicFormat:
			fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"text","text":"Reading file %d."},{"type":"tool_use","id":"call_%d","name":"tool_%d","input":%s}]}`, i, i, i%20, args)
			fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_%d","content":"%s"}]}`, i, result)
		default:
			fmt.Fprintf(&b, `,{"role":"assistant","content":"Reading file %d.","tool_calls":[{"id":"call_%d","type":"function","function":{"name":"tool_%d","arguments":%q}}]}`, i, i, i%20, args)
			fmt.Fprintf(&b, `,{"role":"tool","tool_call_id":"call_%d","content":"%s"}`, i, result)
		}
	}
	b.WriteString(`]}`)
	return b.String()
}
