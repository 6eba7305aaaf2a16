package providers

import (
	"encoding/json"
	"math"
	"testing"

	"switchyard/catalog"
	"switchyard/config"
)

// The golden cost tests of SPEC 10.2: each provider's usage, as its API
// documents it, is normalized to one Usage, and priced by one formula.
//
// Conventions, from the providers' documentation:
//   - OpenAI chat completions: prompt_tokens counts every input token,
//     prompt_tokens_details.cached_tokens the part read from the prompt cache;
//     completion_tokens counts reasoning tokens too
//     (platform.openai.com/docs/guides/prompt-caching, quoted in
//     openai/openai-python issue 2544). The Responses API (and gpt-image)
//     names them input_tokens and input_tokens_details.cached_tokens
//     (ResponseUsage::InputTokensDetails of the OpenAI SDKs).
//   - Anthropic Messages: input_tokens is only the input after the last cache
//     breakpoint; cache_read_input_tokens and cache_creation_input_tokens are
//     counted apart (docs.anthropic.com/en/docs/build-with-claude/prompt-caching).
//     In a stream, message_start carries them and message_delta's usage is
//     cumulative, its input and cache counts optional
//     (docs.anthropic.com/en/docs/build-with-claude/streaming;
//     MessageDeltaUsage of the Anthropic SDKs).
//   - Gemini: usageMetadata.promptTokenCount includes cachedContentTokenCount;
//     thoughtsTokenCount is output beside candidatesTokenCount.
//   - Bedrock Converse: usage.inputTokens excludes cacheReadInputTokens and
//     cacheWriteInputTokens (SPEC 10.2).

func ptr(v float64) *float64 { return &v }

// costPrices are the price variants every usage is priced at.
var costPrices = []struct {
	name  string
	price config.Price
}{
	{"plain", config.Price{Input: 3, Output: 15}},
	{"cached_input", config.Price{Input: 3, Output: 15, CachedInput: ptr(0.3)}},
	{"cached_input+cache_write", config.Price{Input: 3, Output: 15, CachedInput: ptr(0.3), CacheWrite: ptr(3.75)}},
}

func TestCostGolden(t *testing.T) {
	openAIChat := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-up","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":2000,"completion_tokens":300,"total_tokens":2300,"prompt_tokens_details":{"cached_tokens":1536,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":100}}}`
	openAIChunk := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[],` +
		`"usage":{"prompt_tokens":2000,"completion_tokens":300,"total_tokens":2300,"prompt_tokens_details":{"cached_tokens":1536},"completion_tokens_details":{"reasoning_tokens":100}}}`
	openAIResponses := `{"usage":{"input_tokens":2000,"input_tokens_details":{"cached_tokens":1536},"output_tokens":300,"output_tokens_details":{"reasoning_tokens":100},"total_tokens":2300}}`
	anthropicMsg := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-up","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,` +
		`"usage":{"input_tokens":100,"cache_creation_input_tokens":400,"cache_read_input_tokens":1000,"output_tokens":50}}`
	anthropicStream := []sseEvent{
		{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-up","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"cache_creation_input_tokens":400,"cache_read_input_tokens":1000,"output_tokens":1}}}`},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":50}}`},
		{"message_stop", `{"type":"message_stop"}`},
	}
	// the newer message_delta repeats the cumulative input counts
	anthropicStreamFull := append([]sseEvent(nil), anthropicStream...)
	anthropicStreamFull[4].data = `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":100,"cache_creation_input_tokens":400,"cache_read_input_tokens":1000,"output_tokens":50}}`

	relayed := func(c converter, evs []sseEvent) Usage {
		feed(t, c, evs)
		return c.usage()
	}
	// reasoning tokens are a part of the output (reported apart, priced
	// once, as output: the costs below count 300 output tokens)
	openAIUsage := Usage{PromptTokens: 2000, CompletionTokens: 300, CachedTokens: 1536, ReasoningTokens: 100}
	anthropicUsage := Usage{PromptTokens: 1500, CompletionTokens: 50, CachedTokens: 1000, CacheWriteTokens: 400}
	// USD per price variant, by hand: (uncached x input + cached x
	// cached_input + written x cache_write + output x output) / 1e6
	openAICost := [3]float64{
		(2000*3 + 300*15) / 1e6,                  // 0.0105
		(464*3 + 1536*0.3 + 300*15) / 1e6,        // 0.0063528
		(464*3 + 1536*0.3 + 0*3.75 + 4500) / 1e6, // no writes in OpenAI's usage
	}
	anthropicCost := [3]float64{
		(1500*3 + 50*15) / 1e6,                      // 0.00525
		(100*3 + 1000*0.3 + 400*3 + 50*15) / 1e6,    // 0.00255
		(100*3 + 1000*0.3 + 400*3.75 + 50*15) / 1e6, // 0.00285
	}
	for _, tc := range []struct {
		name string
		got  Usage
		want Usage
		cost [3]float64
	}{
		{"openai chat", openAIUsageOf([]byte(openAIChat)), openAIUsage, openAICost},
		{"openai chat stream", relayed(&openAIRelay{}, []sseEvent{{"", openAIChunk}, {"", "[DONE]"}}), openAIUsage, openAICost},
		{"openai responses shape", openAIUsageOf([]byte(openAIResponses)), openAIUsage, openAICost},
		{"openai chat to anthropic client", relayed(newOpenAIToAnthropicStream("m", 1), []sseEvent{{"", openAIChunk}, {"", "[DONE]"}}), openAIUsage, openAICost},
		{"anthropic message", anthropicUsageOf([]byte(anthropicMsg)), anthropicUsage, anthropicCost},
		{"anthropic message to openai client", func() Usage { _, u, _ := anthropicToOpenAIResponse([]byte(anthropicMsg), 1); return u }(), anthropicUsage, anthropicCost},
		{"anthropic stream", relayed(&anthropicRelay{}, anthropicStream), anthropicUsage, anthropicCost},
		{"anthropic stream, cumulative delta", relayed(&anthropicRelay{}, anthropicStreamFull), anthropicUsage, anthropicCost},
		{"anthropic stream to openai client", relayed(newAnthropicToOpenAIStream("m", 1, true), anthropicStream), anthropicUsage, anthropicCost},
		{"anthropic stream to responses client", relayed(newAnthropicToResponsesStream(responsesReq(t, "req_text.json"), "m", 1, nil), anthropicStreamFull), anthropicUsage, anthropicCost},
		// Gemini: promptTokenCount includes cachedContentTokenCount, thoughts are output
		{"gemini usageMetadata", geminiUsage(t, `{"promptTokenCount":2000,"cachedContentTokenCount":1536,"candidatesTokenCount":200,"thoughtsTokenCount":100,"totalTokenCount":2300}`), openAIUsage, openAICost},
		// Bedrock: inputTokens excludes cacheReadInputTokens and cacheWriteInputTokens
		{"bedrock converse", (&cvUsage{InputTokens: 100, OutputTokens: 50, CacheReadInputTokens: 1000, CacheWriteInputTokens: 400}).normalized(), anthropicUsage, anthropicCost},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: usage %+v, want %+v", tc.name, tc.got, tc.want)
			continue
		}
		for i, p := range costPrices {
			d := &catalog.Deployment{Deployment: config.Deployment{ID: "d", Price: p.price}}
			if got := tc.got.Cost(d); math.Abs(got-tc.cost[i]) > 1e-15 {
				t.Errorf("%s at %s prices: cost %.10f, want %.10f", tc.name, p.name, got, tc.cost[i])
			}
		}
	}
}

func geminiUsage(t *testing.T, meta string) Usage {
	t.Helper()
	var u gmUsage
	if err := json.Unmarshal([]byte(meta), &u); err != nil {
		t.Fatal(err)
	}
	return u.usage()
}
