package providers

import (
	"encoding/json"
	"testing"

	"switchyard/providers/bedrockfake"
	"switchyard/wire"
)

// TestHostile4BedrockStreamReasoningIndexes: a ConverseStream from a
// reasoning model (Claude with thinking, DeepSeek-R1, gpt-oss on Bedrock)
// carries its reasoningContent deltas as content block 0 and the answer as
// block 1 (Bedrock API reference, "ContentBlockDelta": reasoningContent,
// text, toolUse; "ContentBlockDeltaEvent": contentBlockIndex). The gateway
// does not relay reasoning, so a Messages client must see the answer's
// blocks numbered from 0 with no gap: Anthropic's streaming reference says
// a block's index is its index in the final message's content array, and
// the SDKs look the block up by that index (content[event.index]), so a
// text delta at index 1 with one block opened fails or is dropped.
func TestHostile4BedrockStreamReasoningIndexes(t *testing.T) {
	frames := bedrockfake.Bytes(
		bedrockfake.Event("messageStart", `{"role":"assistant"}`),
		bedrockfake.Event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"let me think"}}}`),
		bedrockfake.Event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"sig"}}}`),
		bedrockfake.Event("contentBlockStop", `{"contentBlockIndex":0}`),
		bedrockfake.Event("contentBlockDelta", `{"contentBlockIndex":1,"delta":{"text":"Hello"}}`),
		bedrockfake.Event("contentBlockStop", `{"contentBlockIndex":1}`),
		bedrockfake.Event("contentBlockStart", `{"contentBlockIndex":2,"start":{"toolUse":{"toolUseId":"tu_1","name":"f"}}}`),
		bedrockfake.Event("contentBlockDelta", `{"contentBlockIndex":2,"delta":{"toolUse":{"input":"{\"a\":1}"}}}`),
		// block 2 is left open: the end closes it with its client index
		bedrockfake.Event("messageStop", `{"stopReason":"tool_use"}`),
		bedrockfake.Event("metadata", `{"usage":{"inputTokens":3,"outputTokens":9,"totalTokens":12}}`),
	)
	req := bedrockClientReq(t, []byte(`{"model":"m","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`), wire.FormatAnthropic, true)
	out, err := runFrames(newBedrockEvents(req, "msg_bdrk_test", "m", 1), frames)
	if err != nil {
		t.Fatal(err)
	}
	// replay the events as an Anthropic SDK accumulates them
	var content []string // block types, by index
	for _, ev := range parseSSE(t, out) {
		var e struct {
			Index        int `json:"index"`
			ContentBlock *struct {
				Type string `json:"type"`
			} `json:"content_block"`
		}
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			t.Fatal(err)
		}
		switch ev.name {
		case "content_block_start":
			if e.Index != len(content) {
				t.Fatalf("content_block_start index %d, want %d (the next block of the message)\n%s", e.Index, len(content), out)
			}
			content = append(content, e.ContentBlock.Type)
		case "content_block_delta", "content_block_stop":
			if e.Index < 0 || e.Index >= len(content) {
				t.Fatalf("%s index %d names no block (%d opened)\n%s", ev.name, e.Index, len(content), out)
			}
		}
	}
	if len(content) != 2 || content[0] != "text" || content[1] != "tool_use" {
		t.Fatalf("blocks %v, want [text tool_use]\n%s", content, out)
	}
}
