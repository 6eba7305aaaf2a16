package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
)

// TestGoogleAnthropicSDK: the official anthropic-sdk-go client, unchanged,
// on Gemini (sync, stream, a tool round trip) and on Claude served by
// Vertex AI, through the gateway's /v1/messages.
func TestGoogleAnthropicSDK(t *testing.T) {
	_, srv, f := googleNode(t)
	c := anthropic.NewClient(anthropicoption.WithBaseURL(srv.URL+"/"), anthropicoption.WithAPIKey(testKey), anthropicoption.WithMaxRetries(0))
	ctx := bounded(t)
	tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
		Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}},
	}}}

	msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{
		Model: "gemini", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].AsText().Text != "Bonjour" || msg.StopReason != "end_turn" ||
		msg.Usage.InputTokens != 200 || msg.Usage.CacheReadInputTokens != 800 || msg.Usage.OutputTokens != 20 {
		t.Fatalf("sync %s", msg.RawJSON())
	}

	// a tool call, streamed, then its result sent back
	params := anthropic.MessageNewParams{
		Model: "gemini", MaxTokens: 64, Tools: tools,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather in Paris?"))},
	}
	s := c.Messages.NewStreaming(ctx, params)
	acc := anthropic.Message{}
	for s.Next() {
		if err := acc.Accumulate(s.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.StopReason != "tool_use" || len(acc.Content) != 1 || acc.Content[0].Type != "tool_use" {
		t.Fatalf("streamed tool call %+v", acc)
	}
	use := acc.Content[0].AsToolUse()
	var input map[string]string
	if err := json.Unmarshal(use.Input, &input); err != nil || input["city"] != "Paris" || use.Name != "get_weather" || use.ID == "" {
		t.Fatalf("tool use %+v %v", use, err)
	}
	params.Messages = append(params.Messages,
		anthropic.NewAssistantMessage(anthropic.NewToolUseBlock(use.ID, input, use.Name)),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "18C", false)))
	msg, err = c.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].AsText().Text != "Bonjour" {
		t.Fatalf("after the tool result %s", msg.RawJSON())
	}
	f.mu.Lock()
	last := f.bodies[len(f.bodies)-1]
	f.mu.Unlock()
	if !strings.Contains(last, `"functionResponse":{"name":"get_weather","response":{"output":"18C"}}`) {
		t.Fatalf("upstream got %s", last)
	}

	// Claude on Vertex, streamed
	s = c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: "vx-claude", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
	})
	acc = anthropic.Message{}
	for s.Next() {
		if err := acc.Accumulate(s.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil || len(acc.Content) != 1 || acc.Content[0].AsText().Text != "Claude on Vertex" {
		t.Fatalf("vertex claude stream %+v %v", acc, err)
	}
}
