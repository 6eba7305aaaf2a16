package providers

// The JSON shapes of the Gemini API (generativelanguage v1beta, and Vertex
// AI's v1 generateContent, which shares them) that the Gemini translators
// read and write, with the finish-reason, usage and error mapping of SPEC
// 10. Shapes follow Google's reference pages:
//   - https://ai.google.dev/api/generate-content (GenerateContentRequest,
//     GenerateContentResponse, Candidate, FinishReason, PromptFeedback,
//     UsageMetadata)
//   - https://ai.google.dev/api/caching#Content and #Part (parts,
//     functionCall, functionResponse, inlineData, fileData)
//   - https://ai.google.dev/gemini-api/docs/function-calling (tools,
//     functionDeclarations, toolConfig.functionCallingConfig)
//   - https://ai.google.dev/api/embeddings (batchEmbedContents)
// Fields a translator does not map are left out on purpose.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"switchyard/routing"
)

// gmRequest is a generateContent request.
type gmRequest struct {
	Contents          []gmContent   `json:"contents"`
	SystemInstruction *gmContent    `json:"systemInstruction,omitempty"`
	Tools             []gmTool      `json:"tools,omitempty"`
	ToolConfig        *gmToolConfig `json:"toolConfig,omitempty"`
	GenerationConfig  *gmGenConfig  `json:"generationConfig,omitempty"`
}

// gmContent is one turn: role "user" or "model" (none for systemInstruction).
type gmContent struct {
	Role  string   `json:"role,omitempty"`
	Parts []gmPart `json:"parts"`
}

// gmPart holds exactly one of its data fields.
type gmPart struct {
	Text             string              `json:"text,omitempty"`
	Thought          bool                `json:"thought,omitempty"`
	InlineData       *gmBlob             `json:"inlineData,omitempty"`
	FileData         *gmFileData         `json:"fileData,omitempty"`
	FunctionCall     *gmFunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *gmFunctionResponse `json:"functionResponse,omitempty"`
	ThoughtSignature string              `json:"thoughtSignature,omitempty"`
}

type gmBlob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type gmFileData struct {
	MimeType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

type gmFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type gmFunctionResponse struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type gmTool struct {
	FunctionDeclarations []gmFunctionDecl `json:"functionDeclarations,omitempty"`
}

type gmFunctionDecl struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type gmToolConfig struct {
	FunctionCallingConfig gmFunctionCallingConfig `json:"functionCallingConfig"`
}

type gmFunctionCallingConfig struct {
	Mode                 string   `json:"mode"` // AUTO | ANY | NONE
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type gmGenConfig struct {
	Temperature      *float64        `json:"temperature,omitempty"`
	TopP             *float64        `json:"topP,omitempty"`
	MaxOutputTokens  *int            `json:"maxOutputTokens,omitempty"`
	StopSequences    []string        `json:"stopSequences,omitempty"`
	CandidateCount   *int            `json:"candidateCount,omitempty"`
	ResponseMimeType string          `json:"responseMimeType,omitempty"`
	ResponseSchema   json.RawMessage `json:"responseSchema,omitempty"`
	ThinkingConfig   *gmThinking     `json:"thinkingConfig,omitempty"`
}

type gmThinking struct {
	ThinkingBudget *int `json:"thinkingBudget,omitempty"`
}

// gmResponse is a generateContent response, and one event of
// streamGenerateContent?alt=sse (each event is a whole response object
// holding the new parts).
type gmResponse struct {
	Candidates     []gmCandidate     `json:"candidates"`
	PromptFeedback *gmPromptFeedback `json:"promptFeedback,omitempty"`
	UsageMetadata  *gmUsage          `json:"usageMetadata,omitempty"`
	ModelVersion   string            `json:"modelVersion,omitempty"`
	ResponseID     string            `json:"responseId,omitempty"`
}

type gmCandidate struct {
	Content      *gmContent `json:"content,omitempty"`
	FinishReason string     `json:"finishReason,omitempty"`
	Index        int        `json:"index"`
}

type gmPromptFeedback struct {
	BlockReason string `json:"blockReason,omitempty"`
}

// gmUsage is usageMetadata. promptTokenCount includes
// cachedContentTokenCount; totalTokenCount is prompt + candidates +
// toolUsePrompt + thoughts.
//
// The counts are tokenCounts so that any JSON number, however large or
// fractional, is clamped (SPEC 14) instead of failing the whole answer.
type gmUsage struct {
	PromptTokenCount        tokenCount `json:"promptTokenCount"`
	CandidatesTokenCount    tokenCount `json:"candidatesTokenCount"`
	ThoughtsTokenCount      tokenCount `json:"thoughtsTokenCount"`
	CachedContentTokenCount tokenCount `json:"cachedContentTokenCount"`
	ToolUsePromptTokenCount tokenCount `json:"toolUsePromptTokenCount"`
	TotalTokenCount         tokenCount `json:"totalTokenCount"`
}

// usage maps usageMetadata to the gateway's convention (SPEC 10.2): every
// input token (tool-use prompt included) is prompt, thoughts are output
// (candidatesTokenCount does not count them: totalTokenCount is the sum of
// prompt, candidates, tool-use prompt and thoughts) and its reasoning part,
// cached content is the cached part of the prompt.
func (u *gmUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	out := Usage{
		PromptTokens:     min(u.PromptTokenCount.clamped()+u.ToolUsePromptTokenCount.clamped(), MaxUsageTokens),
		CompletionTokens: min(u.CandidatesTokenCount.clamped()+u.ThoughtsTokenCount.clamped(), MaxUsageTokens),
		CachedTokens:     u.CachedContentTokenCount.clamped(),
		ReasoningTokens:  u.ThoughtsTokenCount.clamped(),
	}
	out.CachedTokens = min(out.CachedTokens, out.PromptTokens)
	out.ReasoningTokens = min(out.ReasoningTokens, out.CompletionTokens)
	return out
}

// finishFromGemini maps a candidate's finishReason to an OpenAI finish
// reason (SPEC 10): STOP is stop (tool_calls when the candidate holds
// function calls), MAX_TOKENS length, the safety family content_filter.
// An empty reason (a stream event before the last) is "".
func finishFromGemini(reason string, hasCalls bool) string {
	switch reason {
	case "":
		return ""
	case "STOP":
		if hasCalls {
			return "tool_calls"
		}
		return "stop"
	case "MAX_TOKENS":
		return "length"
	case "SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT":
		return "content_filter"
	case "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS":
		return "stop"
	}
	if hasCalls {
		return "tool_calls"
	}
	return "stop" // LANGUAGE, OTHER, FINISH_REASON_UNSPECIFIED...
}

// blockedError is a content-policy failure: a prompt blocked before any
// candidate (promptFeedback.blockReason), or a candidate stopped for
// safety with nothing produced. It walks the content_policy chain (SPEC 7.3).
func blockedError(reason string) *Error {
	return &Error{Status: 400, Class: routing.ClassContentPolicy, Type: "content_policy_violation", Code: "content_filter",
		Message: "the Gemini deployment blocked the request (" + reason + ")"}
}

// geminiTable classifies Gemini and Vertex errors by error.status (which
// parseErrorBody reads as the type): RESOURCE_EXHAUSTED rate limited,
// INVALID_ARGUMENT about the token count context window, UNAUTHENTICATED and
// PERMISSION_DENIED auth, UNAVAILABLE, INTERNAL and DEADLINE_EXCEEDED server
// errors. Status codes decide first where they are unambiguous; the body's
// status decides for an odd status and for a 0 (an error with no HTTP
// status). Error shape and codes: https://ai.google.dev/gemini-api/docs/troubleshooting
// and https://cloud.google.com/apis/design/errors.
var geminiTable = classTable{
	refine: []int{400, 413, 422},
	rules: []bodyRule{
		// the Gemini API answers a bad key with 400 INVALID_ARGUMENT
		// (reason API_KEY_INVALID): the operator's credential, not the request
		{class: routing.ClassAuth, codes: []string{"API_KEY_INVALID"}, phrases: []string{"api key not valid", "api key expired"}},
		{class: routing.ClassContextWindow, phrases: []string{"token count", "tokens allowed"}, onlyType: "INVALID_ARGUMENT"},
		contextWindowRule,
		contentPolicyRule,
	},
	statuses: commonStatuses,
	byType:   geminiStatuses,
}

var geminiStatuses = map[string]routing.Class{
	"RESOURCE_EXHAUSTED": routing.ClassRateLimited,
	"UNAUTHENTICATED":    routing.ClassAuth,
	"PERMISSION_DENIED":  routing.ClassAuth,
	"UNAVAILABLE":        routing.ClassServerError,
	"INTERNAL":           routing.ClassServerError,
	"DEADLINE_EXCEEDED":  routing.ClassServerError,
	"NOT_FOUND":          routing.ClassNotFound,
	"INVALID_ARGUMENT":   routing.ClassBadRequest,
}

// vertexTable classifies a Vertex answer, which is Google-shaped for Gemini
// models and for Google's own front end, and Anthropic-shaped for Claude
// errors relayed from rawPredict: both tables' rules and types.
var vertexTable = func() classTable {
	t := geminiTable
	t.rules = append(append([]bodyRule(nil), geminiTable.rules...), anthropicTable.rules...)
	t.byType = map[string]routing.Class{}
	for k, v := range anthropicTable.byType {
		t.byType[k] = v
	}
	for k, v := range geminiStatuses {
		t.byType[k] = v
	}
	return t
}()

// newCallID generates an OpenAI-style tool call id for a functionCall that
// carries none (the Gemini API usually sends none; SPEC 10).
func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// geminiSchemaKeys are the Schema fields Gemini's responseSchema and
// function parameters accept (an OpenAPI 3.0 subset); other JSON Schema
// keywords (additionalProperties, $schema, strict...) are rejected by the
// API, so the translation drops them.
var geminiSchemaKeys = map[string]bool{
	"type": true, "format": true, "title": true, "description": true, "nullable": true, "enum": true,
	"maxItems": true, "minItems": true, "properties": true, "required": true, "minProperties": true,
	"maxProperties": true, "minLength": true, "maxLength": true, "pattern": true, "example": true,
	"anyOf": true, "propertyOrdering": true, "default": true, "items": true, "minimum": true, "maximum": true,
}

// geminiSchema rewrites a JSON Schema into Gemini's Schema subset: unknown
// keywords dropped, a type list with "null" becomes nullable, a $ref to the
// schema's $defs (or draft-07 definitions) inlined, since Gemini's Schema
// has no references (https://ai.google.dev/api/caching#Schema; Google's
// GenAI SDKs inline them the same way). nil for an empty or unparsable
// schema, or an object schema without properties (Gemini rejects an OBJECT
// with no properties).
func geminiSchema(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var v map[string]any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	v = newSchemaRefs(v, len(raw)).clean(v, 0)
	if t, _ := v["type"].(string); strings.EqualFold(t, "object") {
		if p, _ := v["properties"].(map[string]any); len(p) == 0 {
			return nil
		}
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return out
}

// maxSchemaDepth bounds the recursion over a client's schema.
const maxSchemaDepth = 64

// schemaRefBudget is how many times a schema's own size its inlined
// definitions may add up to (SPEC 14: a small multiple of the body): a
// schema whose definitions each use the next one twice would otherwise
// double at every level.
const schemaRefBudget = 8

// schemaRefs resolves the local references of one schema: "#" (the root),
// "#/$defs/Name" and "#/definitions/Name".
type schemaRefs struct {
	defs   map[string]map[string]any // by reference
	size   map[string]int            // a definition's JSON size
	active map[string]bool           // references being inlined on the current path
	budget int                       // bytes of definitions still allowed to be inlined
}

func newSchemaRefs(root map[string]any, rawLen int) *schemaRefs {
	r := &schemaRefs{defs: map[string]map[string]any{}, size: map[string]int{}, active: map[string]bool{"#": true},
		budget: schemaRefBudget * rawLen}
	r.defs["#"], r.size["#"] = root, rawLen // being cleaned: a "#" inside is recursive
	for _, key := range []string{"$defs", "definitions"} {
		defs, _ := root[key].(map[string]any)
		for name, d := range defs {
			m, ok := d.(map[string]any)
			if !ok {
				continue
			}
			ref := "#/" + key + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
			b, _ := json.Marshal(m)
			r.defs[ref], r.size[ref] = m, len(b)
		}
	}
	return r
}

// clean is cleanSchema with v's $ref, if any, inlined: the definition with
// v's other keywords (a description...) over it. A reference inlined
// already on the current path (a recursive model) or past the budget
// becomes the definition's type alone; an unknown one is dropped.
func (r *schemaRefs) clean(v map[string]any, depth int) map[string]any {
	ref, ok := v["$ref"].(string)
	if !ok {
		return cleanSchema(v, depth, r)
	}
	def := r.defs[ref]
	merged := make(map[string]any, len(v)+len(def))
	if def != nil && !r.active[ref] && r.size[ref] <= r.budget {
		r.budget -= r.size[ref]
		for k, x := range def {
			if k != "$defs" && k != "definitions" {
				merged[k] = x
			}
		}
	} else if t, ok := def["type"]; ok {
		merged["type"] = t
	}
	for k, x := range v {
		if k != "$ref" {
			merged[k] = x
		}
	}
	r.active[ref] = true
	defer delete(r.active, ref)
	if _, alias := merged["$ref"]; alias && depth <= maxSchemaDepth {
		return r.clean(merged, depth+1) // a definition that is a reference
	}
	return cleanSchema(merged, depth, r)
}

func cleanSchema(v map[string]any, depth int, refs *schemaRefs) map[string]any {
	out := make(map[string]any, len(v))
	if depth > maxSchemaDepth {
		return out
	}
	// in key order: the references inlined, and so the budget spent,
	// are the same for every call with the same schema
	for _, k := range slices.Sorted(maps.Keys(v)) {
		x := v[k]
		if !geminiSchemaKeys[k] {
			continue
		}
		switch k {
		case "type":
			if list, ok := x.([]any); ok {
				var types []string
				for _, t := range list {
					if s, _ := t.(string); s == "null" {
						out["nullable"] = true
					} else if s != "" {
						types = append(types, s)
					}
				}
				if len(types) > 0 {
					out["type"] = types[0]
				}
				continue
			}
		case "properties":
			if props, ok := x.(map[string]any); ok {
				clean := make(map[string]any, len(props))
				for _, name := range slices.Sorted(maps.Keys(props)) {
					p := props[name]
					if m, ok := p.(map[string]any); ok {
						clean[name] = refs.clean(m, depth+1)
					}
				}
				out[k] = clean
				continue
			}
		case "items":
			if m, ok := x.(map[string]any); ok {
				out[k] = refs.clean(m, depth+1)
				continue
			}
		case "enum":
			// Gemini's enum is a list of strings, for a STRING value; any
			// other enum is a 400 INVALID_ARGUMENT (TYPE_STRING)
			list, _ := x.([]any)
			var vals []any
			for _, e := range list {
				switch e := e.(type) {
				case nil:
					out["nullable"] = true
				case string:
					vals = append(vals, e)
				default:
					vals, list = nil, nil
				}
				if list == nil {
					break
				}
			}
			if len(vals) > 0 && isStringSchema(v["type"]) {
				out[k] = vals
			}
			continue
		case "anyOf":
			if list, ok := x.([]any); ok {
				var clean []any
				for _, s := range list {
					if m, ok := s.(map[string]any); ok {
						clean = append(clean, refs.clean(m, depth+1))
					}
				}
				out[k] = clean
				continue
			}
		}
		out[k] = x
	}
	// Gemini refuses an OBJECT whose properties are present but empty
	// ("should be non-empty for OBJECT type": a free-form object stays
	// {"type":"object"}) and a required name its properties do not define
	if p, ok := out["properties"].(map[string]any); ok && len(p) == 0 {
		delete(out, "properties")
	}
	if req, ok := out["required"]; ok {
		props, _ := out["properties"].(map[string]any)
		list, _ := req.([]any)
		var keep []any
		for _, r := range list {
			if name, ok := r.(string); ok && props[name] != nil {
				keep = append(keep, name)
			}
		}
		if len(keep) == 0 {
			delete(out, "required")
		} else {
			out["required"] = keep
		}
	}
	return out
}

// isStringSchema reports a JSON Schema type that allows a string: none,
// "string", or a list holding "string".
func isStringSchema(t any) bool {
	switch t := t.(type) {
	case nil:
		return true
	case string:
		return strings.EqualFold(t, "string")
	case []any:
		for _, x := range t {
			if s, _ := x.(string); strings.EqualFold(s, "string") {
				return true
			}
		}
	}
	return false
}

// thinkingBudgets maps a reasoning effort to a thinkingBudget (tokens).
// "none"/"minimal" turn thinking off where the model allows it.
var thinkingBudgets = map[string]int{"none": 0, "minimal": 0, "low": 1024, "medium": 8192, "high": 24576}

// minProThinking is the smallest thinkingBudget Gemini Pro models accept:
// they cannot turn thinking off, so "off" becomes "as little as allowed".
const minProThinking = 128
