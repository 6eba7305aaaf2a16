package providers

import (
	"encoding/json"
	"strings"
	"testing"

	"switchyard/catalog"
	"switchyard/wire"
)

// TestHostile5BedrockToolChoiceNone: a client's tool_choice "none" (OpenAI:
// "the model will not call any tool and instead generates a message";
// Anthropic {"type":"none"}) has no Converse ToolChoice member (the API
// reference's ToolChoice union is auto | any | tool, auto the default), so
// sending the tools let the model call one anyway and the client got
// finish_reason tool_calls it had ruled out. The tools are not offered:
// no toolConfig, and the transcript's tool blocks go as text, as for a
// request that offers no tools (Converse refuses tool blocks without a
// toolConfig).
func TestHostile5BedrockToolChoiceNone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format wire.Format
		body   string
	}{
		{"openai", wire.FormatOpenAI, `{"model":"m","tool_choice":"none",
			"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
			"messages":[{"role":"user","content":"weather in Paris?"},
				{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
				{"role":"tool","tool_call_id":"call_1","content":"18C"},
				{"role":"user","content":"now summarize without calling tools"}]}`},
		{"anthropic", wire.FormatAnthropic, `{"model":"m","max_tokens":100,"tool_choice":{"type":"none"},
			"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
			"messages":[{"role":"user","content":"weather in Paris?"},
				{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"},{"type":"text","text":"now summarize"}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			creq, err := wire.Parse([]byte(tc.body), catalog.OpChat, tc.format)
			if err != nil {
				t.Fatal(err)
			}
			cv, err := converseRequest(&Request{Op: catalog.OpChat, Client: creq}, "anthropic.claude-3-haiku")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(cv)
			if cv.ToolConfig != nil {
				t.Fatalf("tool_choice none offered the tools to Converse: %s", b)
			}
			if strings.Contains(string(b), `"toolUse"`) || strings.Contains(string(b), `"toolResult"`) {
				t.Fatalf("tool blocks sent without a toolConfig: %s", b)
			}
			if !strings.Contains(string(b), "[tool call get_weather") || !strings.Contains(string(b), "18C") {
				t.Fatalf("the tool transcript was lost: %s", b)
			}
		})
	}
}

// TestHostile5BedrockToolChoiceAutoKeepsTools: the other choices still
// offer the tools.
func TestHostile5BedrockToolChoiceAutoKeepsTools(t *testing.T) {
	for _, choice := range []string{`"auto"`, `"required"`, `{"type":"function","function":{"name":"f"}}`} {
		body := `{"model":"m","tool_choice":` + choice + `,"tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"hi"}]}`
		creq, err := wire.Parse([]byte(body), catalog.OpChat, wire.FormatOpenAI)
		if err != nil {
			t.Fatal(err)
		}
		cv, err := converseRequest(&Request{Op: catalog.OpChat, Client: creq}, "m")
		if err != nil {
			t.Fatal(err)
		}
		if cv.ToolConfig == nil || cv.ToolConfig.ToolChoice == nil {
			t.Fatalf("tool_choice %s: tools or choice dropped", choice)
		}
	}
}
