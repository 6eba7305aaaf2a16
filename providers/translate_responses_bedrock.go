package providers

// Translation for a Responses API client (POST /v1/responses) served by a
// Bedrock deployment: the Responses request becomes a chat request
// (responsesToChat), then Messages and Converse, as for an Anthropic
// deployment, so instructions, input items, function calls and their
// outputs read the same across providers; the Converse answer or stream
// comes back through Messages into a Responses object or event stream
// (anthropicToResponses, anthropicToResponsesStream), event by event
// (SPEC 10.1). text.format and reasoning.effort have no Converse
// equivalent and are dropped (reasoning.effort still chose the tier).

import "switchyard/wire"

// responsesToConverse maps a Responses request onto a Converse request;
// max_output_tokens becomes inferenceConfig.maxTokens.
func responsesToConverse(rq *wire.Responses, model string, stream bool) (*cvRequest, error) {
	chat, err := responsesToChat(rq, model, stream)
	if err != nil {
		return nil, err
	}
	return chatToConverse(&chat.oaRequest, model, stream)
}
