package providers

// Translation for an OpenAI-format client (POST /v1/chat/completions)
// served by a Bedrock deployment: the chat request goes through the chat ->
// Messages mapping (chatToAnthropic), so system prompts, images, tools, tool
// calls and tool results read exactly as they do for an Anthropic
// deployment, and then onto Converse (translate_anthropic_bedrock.go). The answer comes back the
// same way: Converse -> Messages -> chat completion or chunks.

// chatToConverse maps a parsed chat request onto a Converse request.
// inferenceConfig.maxTokens is sent only when the client set max_tokens or
// max_completion_tokens: a Converse request may leave it to the model.
func chatToConverse(in *oaRequest, model string, stream bool) (*cvRequest, error) {
	an, err := chatToAnthropic(in, model, stream)
	if err != nil {
		return nil, err
	}
	set := (in.MaxCompletionTokens != nil && *in.MaxCompletionTokens > 0) || (in.MaxTokens != nil && *in.MaxTokens > 0)
	return anthropicToConverse(an, set)
}
