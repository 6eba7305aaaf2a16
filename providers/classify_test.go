package providers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"switchyard/routing"
)

// Real error bodies as the providers send them.
const (
	openAIContextLength = `{
  "error": {
    "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 131245 tokens. Please reduce the length of the messages.",
    "type": "invalid_request_error",
    "param": "messages",
    "code": "context_length_exceeded"
  }
}`
	openAIRateLimit = `{
    "error": {
        "message": "Rate limit reached for gpt-4o-mini in organization org-abc123 on tokens per min (TPM): Limit 200000, Used 199812, Requested 1204. Please try again in 304ms. Visit https://platform.openai.com/account/rate-limits to learn more.",
        "type": "tokens",
        "param": null,
        "code": "rate_limit_exceeded"
    }
}`
	openAIContentPolicyImages = `{
  "error": {
    "code": "content_policy_violation",
    "message": "Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed by our safety system.",
    "param": null,
    "type": "invalid_request_error"
  }
}`
	azureContentFilter = `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry. To learn more about our content filtering policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":true,"detected":true},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}}}}`
	openAIInvalidKey   = `{
    "error": {
        "message": "Incorrect API key provided: sk-proj-********************abcd. You can find your API key at https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error",
        "param": null,
        "code": "invalid_api_key"
    }
}`
	openAIModelNotFound = `{
    "error": {
        "message": "The model ` + "`gpt-5-turbo`" + ` does not exist or you do not have access to it.",
        "type": "invalid_request_error",
        "param": null,
        "code": "model_not_found"
    }
}`
	openAIServerError = `{
  "error": {
    "message": "The server had an error while processing your request. Sorry about that!",
    "type": "server_error",
    "param": null,
    "code": null
  }
}`
	openAIBadParam = `{
  "error": {
    "message": "Invalid value for 'temperature': must be between 0 and 2.",
    "type": "invalid_request_error",
    "param": "temperature",
    "code": "invalid_value"
  }
}`
	vllmContextLength = `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5120 tokens (4096 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`

	anthropicOverloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	anthropicTooLong    = `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`
	anthropicExceedCtx  = `{"type":"error","error":{"type":"invalid_request_error","message":"input length and ` + "`max_tokens`" + ` exceed context limit: 197633 + 8192 > 200000, decrease input length or ` + "`max_tokens`" + ` and try again"}}`
	anthropicAuth       = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`
	anthropicPermission = `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}`
	anthropicNotFound   = `{"type":"error","error":{"type":"not_found_error","message":"model: claude-3-opus-2099"}}`
	anthropicRateLimit  = `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization (abc) of 50,000 input tokens per minute."}}`
	anthropicAPIError   = `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`
	anthropicPolicy     = `{"type":"error","error":{"type":"invalid_request_error","message":"Output blocked by content filtering policy"}}`
	anthropicBadParam   = `{"type":"error","error":{"type":"invalid_request_error","message":"messages.0.content: Input should be a valid list"}}`
	anthropicTooLarge   = `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		kind   string
		status int
		body   string
		want   routing.Class
	}{
		{"ok", KindOpenAI, 200, `{}`, routing.ClassOK},
		{"openai context_length_exceeded", KindOpenAI, 400, openAIContextLength, routing.ClassContextWindow},
		{"openai rate limit", KindOpenAI, 429, openAIRateLimit, routing.ClassRateLimited},
		{"openai images content policy", KindOpenAI, 400, openAIContentPolicyImages, routing.ClassContentPolicy},
		{"azure content_filter", KindOpenAI, 400, azureContentFilter, routing.ClassContentPolicy},
		{"openai invalid key", KindOpenAI, 401, openAIInvalidKey, routing.ClassAuth},
		{"openai forbidden", KindOpenAI, 403, `{"error":{"message":"Country, region, or territory not supported","type":"request_forbidden","param":null,"code":"unsupported_country_region_territory"}}`, routing.ClassAuth},
		{"openai model not found", KindOpenAI, 404, openAIModelNotFound, routing.ClassNotFound},
		{"openai 500", KindOpenAI, 500, openAIServerError, routing.ClassServerError},
		{"openai 503 html", KindOpenAI, 503, `<html><body>Service Unavailable</body></html>`, routing.ClassServerError},
		{"openai bad param", KindOpenAI, 400, openAIBadParam, routing.ClassBadRequest},
		{"openai 422", KindOpenAI, 422, `{"detail":[{"loc":["body","messages"],"msg":"field required","type":"value_error.missing"}]}`, routing.ClassBadRequest},
		{"openai 408", KindOpenAI, 408, ``, routing.ClassTimeout},
		{"vllm context length", KindOpenAI, 400, vllmContextLength, routing.ClassContextWindow},
		{"context words on a 500 stay server_error", KindOpenAI, 500, openAIContextLength, routing.ClassServerError},
		{"simulated uses the openai table", KindSimulated, 400, openAIContextLength, routing.ClassContextWindow},
		{"unknown kind uses the openai table", "vllm", 400, azureContentFilter, routing.ClassContentPolicy},

		{"anthropic overloaded 529", KindAnthropic, 529, anthropicOverloaded, routing.ClassServerError},
		{"anthropic prompt too long", KindAnthropic, 400, anthropicTooLong, routing.ClassContextWindow},
		{"anthropic exceed context limit", KindAnthropic, 400, anthropicExceedCtx, routing.ClassContextWindow},
		{"anthropic invalid_request too long", KindAnthropic, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: text content is too long"}}`, routing.ClassContextWindow},
		{"anthropic authentication_error", KindAnthropic, 401, anthropicAuth, routing.ClassAuth},
		{"anthropic permission_error", KindAnthropic, 403, anthropicPermission, routing.ClassAuth},
		{"anthropic not_found_error", KindAnthropic, 404, anthropicNotFound, routing.ClassNotFound},
		{"anthropic rate_limit_error", KindAnthropic, 429, anthropicRateLimit, routing.ClassRateLimited},
		{"anthropic api_error", KindAnthropic, 500, anthropicAPIError, routing.ClassServerError},
		{"anthropic policy", KindAnthropic, 400, anthropicPolicy, routing.ClassContentPolicy},
		{"anthropic bad param", KindAnthropic, 400, anthropicBadParam, routing.ClassBadRequest},
		{"anthropic request_too_large", KindAnthropic, 413, anthropicTooLarge, routing.ClassBadRequest},
		{"anthropic odd status keeps its type", KindAnthropic, 409, anthropicOverloaded, routing.ClassServerError},
		{"anthropic error event (no status)", KindAnthropic, 0, anthropicOverloaded, routing.ClassServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.kind, tt.status, []byte(tt.body)); got != tt.want {
				t.Errorf("Classify(%s, %d) = %s, want %s", tt.kind, tt.status, got, tt.want)
			}
		})
	}
}

func TestNewStatusErrorFields(t *testing.T) {
	h := http.Header{}
	h.Set("Retry-After", "7")
	e := newStatusError(KindOpenAI, 429, []byte(openAIRateLimit), h)
	if e.Class != routing.ClassRateLimited || e.Code != "rate_limit_exceeded" || e.Type != "tokens" || e.RetryAfter != 7*time.Second {
		t.Fatalf("got %+v", e)
	}
	if e.Message == "" || e.Status != 429 {
		t.Fatalf("message/status missing: %+v", e)
	}
	e = newStatusError(KindOpenAI, 400, []byte(azureContentFilter), nil)
	if e.Type != "" || e.Code != "content_filter" || e.Class != routing.ClassContentPolicy {
		t.Fatalf("azure: %+v", e)
	}
	e = newStatusError(KindAnthropic, 529, []byte(anthropicOverloaded), nil)
	if e.Type != "overloaded_error" || e.Message != "Overloaded" {
		t.Fatalf("anthropic: %+v", e)
	}
	e = newStatusError(KindOpenAI, 502, []byte("bad gateway"), nil)
	if e.Message != "bad gateway" || e.Class != routing.ClassServerError {
		t.Fatalf("plain: %+v", e)
	}
	e = newStatusError(KindOpenAI, 503, nil, nil)
	if e.Message != "Service Unavailable" {
		t.Fatalf("empty body message = %q", e.Message)
	}
	if got := e.Error(); got != "upstream 503 server_error: Service Unavailable" {
		t.Fatalf("Error() = %q", got)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		h    map[string]string
		want time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "20"}, 20 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second},
		{"past date", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"ms wins", map[string]string{"Retry-After": "1", "retry-after-ms": "304"}, 304 * time.Millisecond},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"negative", map[string]string{"Retry-After": "-3"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.h {
				h.Set(k, v)
			}
			if got := parseRetryAfter(h, now); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassifyTransport(t *testing.T) {
	dial := &url.Error{Op: "Post", URL: "https://secret.example/v1?key=abc", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	tests := []struct {
		name   string
		ctxErr error
		err    error
		want   routing.Class
	}{
		{"client canceled", context.Canceled, &url.Error{Op: "Post", URL: "x", Err: context.Canceled}, routing.ClassCanceled},
		{"deadline", context.DeadlineExceeded, &url.Error{Op: "Post", URL: "x", Err: context.DeadlineExceeded}, routing.ClassTimeout},
		{"dial refused", nil, dial, routing.ClassNetwork},
		{"net timeout", nil, &url.Error{Op: "Post", URL: "x", Err: timeoutErr{}}, routing.ClassTimeout},
		{"reset", nil, errors.New("read: connection reset by peer"), routing.ClassNetwork},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := classifyTransport(tt.ctxErr, tt.err)
			if e.Class != tt.want {
				t.Fatalf("class = %s, want %s", e.Class, tt.want)
			}
		})
	}
	if e := classifyTransport(nil, dial); e.Message != "dial tcp: connection refused" {
		t.Fatalf("message %q must not carry the URL", e.Message)
	}
	if e := classifyTransport(context.Canceled, context.Canceled); !errors.Is(e, context.Canceled) {
		t.Fatal("canceled error must unwrap to context.Canceled")
	}
	if e := AsError(fmt.Errorf("wrapped: %w", &Error{Class: routing.ClassAuth})); e.Class != routing.ClassAuth {
		t.Fatalf("AsError lost the wrapped *Error: %+v", e)
	}
	if AsError(nil) != nil {
		t.Fatal("AsError(nil) must be nil")
	}
}
