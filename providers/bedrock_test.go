package providers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/providers/bedrockfake"
	"switchyard/routing"
	"switchyard/wire"
)

// Example credentials of the AWS documentation's shape; the fake refuses
// any other secret.
const (
	testAKID   = "AKIAIOSFODNN7EXAMPLE"
	testSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	testToken  = "FwoGZXIvYXdzEXAMPLESESSIONTOKENvalue0123456789"
)

// inferenceProfileARN is a model id that must be escaped as one segment.
const inferenceProfileARN = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-sonnet-20241022-v2:0"

func newBedrockFake(t *testing.T, answer func(http.ResponseWriter, *bedrockfake.Call)) (*bedrockfake.Server, *httptest.Server) {
	t.Helper()
	f := &bedrockfake.Server{Creds: aws.Credentials{AccessKeyID: testAKID, SecretAccessKey: testSecret, SessionToken: testToken}, Answer: answer}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func bedrockProvider(base string) *catalog.Provider {
	return &catalog.Provider{Provider: config.Provider{Name: "br", Kind: KindBedrock, BaseURL: base, Region: "us-east-1",
		AWSAccessKeyID: testAKID, AWSSecretAccessKey: testSecret, AWSSessionToken: testToken}}
}

func newBedrockAdapter(t *testing.T, p *catalog.Provider) Adapter {
	t.Helper()
	a, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestBedrockSignedCallsWithARN: sync and stream calls are SigV4-signed
// (the fake re-signs and compares), go to /model/{escaped ARN}/converse(-stream),
// and come back translated.
func TestBedrockSignedCallsWithARN(t *testing.T) {
	f, srv := newBedrockFake(t, nil)
	p := bedrockProvider(srv.URL)
	a := newBedrockAdapter(t, p)
	d := deployment(p, inferenceProfileARN)

	resp, err := a.Do(context.Background(), d, chatReq(t, `{"model":"public","messages":[{"role":"user","content":"hi"}]}`, wire.FormatOpenAI))
	if err != nil {
		t.Fatal(err)
	}
	var out oaResponse
	if err := json.Unmarshal(resp.Body, &out); err != nil || len(out.Choices) != 1 || *out.Choices[0].Message.Content != "Hello" {
		t.Fatalf("sync body %s (%v)", resp.Body, err)
	}
	if resp.Usage != (Usage{PromptTokens: 3, CompletionTokens: 1}) || resp.Header.Get("Upstream-Request-Id") != "fake-req-1" {
		t.Fatalf("usage %+v header %v", resp.Usage, resp.Header)
	}

	resp, err = a.Do(context.Background(), d, chatReq(t, `{"model":"public","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, wire.FormatOpenAI))
	if err != nil {
		t.Fatal(err)
	}
	all, err := drain(t, resp.Stream)
	if err != nil || !strings.Contains(string(all), `"content":"Hello"`) || !strings.HasSuffix(string(all), "data: [DONE]\n\n") {
		t.Fatalf("stream %q (%v)", all, err)
	}
	if u := resp.Stream.Usage(); u != (Usage{PromptTokens: 3, CompletionTokens: 1}) {
		t.Fatalf("stream usage %+v", u)
	}

	calls := f.Calls()
	if len(calls) != 2 {
		t.Fatalf("%d verified calls, want 2", len(calls))
	}
	const esc = "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-3-5-sonnet-20241022-v2%3A0/"
	if calls[0].EscapedPath != esc+"converse" || calls[1].EscapedPath != esc+"converse-stream" || calls[0].ModelID != inferenceProfileARN {
		t.Fatalf("paths %q %q model %q", calls[0].EscapedPath, calls[1].EscapedPath, calls[0].ModelID)
	}
	if calls[1].Header.Get("Accept") != eventStreamType || calls[0].Header.Get("X-Amz-Security-Token") != testToken {
		t.Fatalf("headers %v", calls[1].Header)
	}
	assertJSON(t, calls[0].Body, `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`)
}

// TestBedrockEnvironmentCredentials: with no keys in the config, the AWS
// default chain finds them in the environment.
func TestBedrockEnvironmentCredentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", testAKID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecret)
	t.Setenv("AWS_SESSION_TOKEN", testToken)
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	f, srv := newBedrockFake(t, nil)
	p := &catalog.Provider{Provider: config.Provider{Name: "br", Kind: KindBedrock, BaseURL: srv.URL, Region: "us-east-1"}}
	a := newBedrockAdapter(t, p)
	if _, err := a.Do(context.Background(), deployment(p, "amazon.nova-lite-v1:0"), chatReq(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, wire.FormatOpenAI)); err != nil {
		t.Fatal(err)
	}
	if len(f.Calls()) != 1 {
		t.Fatal("the signed call was not verified")
	}
}

// TestBedrockBearerAPIKey: a Bedrock API key goes out as Bearer, unsigned.
func TestBedrockBearerAPIKey(t *testing.T) {
	f := &bedrockfake.Server{APIKey: "ABSKQmVkcm9ja0FQSUtleS1leGFtcGxlLWtleQ=="}
	srv := httptest.NewServer(f)
	defer srv.Close()
	p := &catalog.Provider{Provider: config.Provider{Name: "br", Kind: KindBedrock, BaseURL: srv.URL, Region: "us-west-2", APIKey: f.APIKey}}
	a := newBedrockAdapter(t, p)
	if _, err := a.Do(context.Background(), deployment(p, "m"), chatReq(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, wire.FormatOpenAI)); err != nil {
		t.Fatal(err)
	}
	c := f.Calls()
	if len(c) != 1 || c[0].Header.Get("X-Amz-Date") != "" {
		t.Fatalf("calls %+v", c)
	}
}

// TestBedrockRefusedSignature: a wrong secret is refused by the fake's
// re-signing; the error is an auth failure with no secret in it.
func TestBedrockRefusedSignature(t *testing.T) {
	_, srv := newBedrockFake(t, nil)
	p := bedrockProvider(srv.URL)
	p.AWSSecretAccessKey = "wrongSecretKeyEXAMPLEwrongSecretKeyEXAMPL"
	a := newBedrockAdapter(t, p)
	_, err := a.Do(context.Background(), deployment(p, "m"), chatReq(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, wire.FormatOpenAI))
	e := wantClass(t, err, routing.ClassAuth)
	if e.Status != 403 || e.Type != "InvalidSignatureException" {
		t.Fatalf("%+v", e)
	}
	for _, s := range []string{p.AWSSecretAccessKey, testToken, testAKID, "127.0.0.1"} {
		if strings.Contains(err.Error(), s) || strings.Contains(string(e.body), s) {
			t.Fatalf("error leaks %q: %v", s, err)
		}
	}
}

// TestBedrockErrorClasses follows the Converse "Errors" section of the
// Bedrock Runtime API reference (and its common errors): the type comes
// from x-amzn-errortype or __type, a ValidationException about the input's
// length is a context-window error.
func TestBedrockErrorClasses(t *testing.T) {
	cases := []struct {
		status     int
		header     string
		body       string
		want       routing.Class
		retryAfter bool
	}{
		{429, "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/", `{"message":"Too many requests, please wait before trying again."}`, routing.ClassRateLimited, false},
		{400, "ValidationException", `{"message":"Input is too long for requested model."}`, routing.ClassContextWindow, false},
		{400, "", `{"__type":"com.amazon.coral.validate#ValidationException","message":"The model returned the following errors: prompt is too long: 210000 tokens > 200000 maximum"}`, routing.ClassContextWindow, false},
		{400, "ValidationException", `{"message":"The provided model identifier is invalid."}`, routing.ClassBadRequest, false},
		{403, "AccessDeniedException", `{"message":"You don't have access to the model with the specified model ID."}`, routing.ClassAuth, false},
		{403, "UnrecognizedClientException", `{"message":"The security token included in the request is invalid."}`, routing.ClassAuth, false},
		{503, "ServiceUnavailableException", `{"message":"Service unavailable"}`, routing.ClassServerError, false},
		{429, "ModelNotReadyException", `{"message":"Model is not ready for inference."}`, routing.ClassServerError, false},
		{500, "InternalServerException", `{"Message":"Internal failure"}`, routing.ClassServerError, false},
		{424, "ModelErrorException", `{"message":"The model failed"}`, routing.ClassServerError, false},
		{404, "ResourceNotFoundException", `{"message":"Model not found"}`, routing.ClassNotFound, false},
		{408, "ModelTimeoutException", `{"message":"timed out"}`, routing.ClassTimeout, false},
		{502, "", `<html>bad gateway</html>`, routing.ClassServerError, false},
	}
	for _, tc := range cases {
		h := http.Header{}
		if tc.header != "" {
			h.Set("X-Amzn-Errortype", tc.header)
		}
		e := newBedrockError(tc.status, h, []byte(tc.body))
		if e.Class != tc.want {
			t.Errorf("%d %s %s: class %s, want %s", tc.status, tc.header, tc.body, e.Class, tc.want)
		}
	}
	for _, tc := range []struct {
		typ  string
		want routing.Class
	}{
		{"throttlingException", routing.ClassRateLimited},
		{"modelStreamErrorException", routing.ClassServerError},
		{"internalServerException", routing.ClassServerError},
		{"serviceUnavailableException", routing.ClassServerError},
		{"validationException", routing.ClassBadRequest},
	} {
		if c := bedrockStreamException(tc.typ, []byte(`{"message":"x"}`)).Class; c != tc.want {
			t.Errorf("%s: %s, want %s", tc.typ, c, tc.want)
		}
	}
}

// TestBedrockFailuresBeforeFirstByte: an HTTP error, an exception as the
// first frame and a filtered answer before content are attempt errors of
// their class (the gateway can still fail over).
func TestBedrockFailuresBeforeFirstByte(t *testing.T) {
	var answer func(http.ResponseWriter, *bedrockfake.Call)
	_, srv := newBedrockFake(t, func(w http.ResponseWriter, c *bedrockfake.Call) { answer(w, c) })
	p := bedrockProvider(srv.URL)
	a := newBedrockAdapter(t, p)
	d := deployment(p, "anthropic.claude-3-haiku-20240307-v1:0")
	stream := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	sync := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	cases := []struct {
		name, body string
		answer     func(http.ResponseWriter, *bedrockfake.Call)
		want       routing.Class
	}{
		{"throttled", sync, func(w http.ResponseWriter, _ *bedrockfake.Call) {
			bedrockfake.WriteError(w, 429, "ThrottlingException", "Too many requests")
		}, routing.ClassRateLimited},
		{"first frame throttled", stream, func(w http.ResponseWriter, _ *bedrockfake.Call) {
			bedrockfake.WriteFrames(w, bedrockfake.Event("messageStart", `{"role":"assistant"}`), bedrockfake.Exception("throttlingException", "slow down"))
		}, routing.ClassRateLimited},
		{"guardrail sync", sync, func(w http.ResponseWriter, _ *bedrockfake.Call) {
			io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[]}},"stopReason":"guardrail_intervened","usage":{"inputTokens":5,"outputTokens":0,"totalTokens":5}}`)
		}, routing.ClassContentPolicy},
		{"content filtered stream", stream, func(w http.ResponseWriter, _ *bedrockfake.Call) {
			bedrockfake.WriteFrames(w, bedrockfake.Event("messageStart", `{"role":"assistant"}`), bedrockfake.Event("messageStop", `{"stopReason":"content_filtered"}`))
		}, routing.ClassContentPolicy},
		{"cut before stop", stream, func(w http.ResponseWriter, _ *bedrockfake.Call) {
			bedrockfake.WriteFrames(w, bedrockfake.Event("messageStart", `{"role":"assistant"}`))
		}, routing.ClassNetwork},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			answer = tc.answer
			_, err := a.Do(context.Background(), d, chatReq(t, tc.body, wire.FormatOpenAI))
			wantClass(t, err, tc.want)
		})
	}
}

// TestBedrockMidStreamException: after content reached the client, an
// exception frame ends the stream as its class.
func TestBedrockMidStreamException(t *testing.T) {
	_, srv := newBedrockFake(t, func(w http.ResponseWriter, _ *bedrockfake.Call) {
		bedrockfake.WriteFrames(w,
			bedrockfake.Event("messageStart", `{"role":"assistant"}`),
			bedrockfake.Event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"partial"}}`),
			bedrockfake.Exception("modelStreamErrorException", "The model stream failed"))
	})
	p := bedrockProvider(srv.URL)
	a := newBedrockAdapter(t, p)
	for _, f := range []wire.Format{wire.FormatOpenAI, wire.FormatAnthropic} {
		body := `{"model":"m","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
		resp, err := a.Do(context.Background(), deployment(p, "m"), chatReq(t, body, f))
		if err != nil {
			t.Fatal(err)
		}
		all, err := drain(t, resp.Stream)
		if !strings.Contains(string(all), "partial") {
			t.Fatalf("relayed %q", all)
		}
		e := wantClass(t, err, routing.ClassServerError)
		if e.Type != "ModelStreamErrorException" || e.Message != "The model stream failed" {
			t.Fatalf("%+v", e)
		}
	}
}

// TestBedrockUsageAndCost: Bedrock's inputTokens excludes cache reads and
// writes (SPEC 10.2): the gateway's prompt count includes them, and the
// cost prices each part; absurd counts are clamped (SPEC 14).
func TestBedrockUsageAndCost(t *testing.T) {
	u := (&cvUsage{InputTokens: 100, OutputTokens: 50, CacheReadInputTokens: 1000, CacheWriteInputTokens: 200}).normalized()
	if u != (Usage{PromptTokens: 1300, CompletionTokens: 50, CachedTokens: 1000, CacheWriteTokens: 200}) {
		t.Fatalf("%+v", u)
	}
	d := &catalog.Deployment{Deployment: config.Deployment{Price: config.Price{Input: 3, Output: 15, CachedInput: ptr(0.3), CacheWrite: ptr(3.75)}}}
	got := u.Cost(d)
	want := (100*3 + 1000*0.3 + 200*3.75 + 50*15) / 1e6
	if diff := got - want; diff > 1e-12 || diff < -1e-12 {
		t.Fatalf("cost %g, want %g", got, want)
	}
	if an := anUsageOf(u); an.InputTokens != 100 || an.CacheReadInputTokens != 1000 || an.CacheCreationInputTokens != 200 {
		t.Fatalf("anthropic view %+v", an)
	}
	c := (&cvUsage{InputTokens: -5, OutputTokens: 1 << 40, CacheReadInputTokens: 200_000_000}).normalized()
	if c != (Usage{PromptTokens: MaxUsageTokens, CompletionTokens: MaxUsageTokens, CachedTokens: MaxUsageTokens}) {
		t.Fatalf("clamped %+v", c)
	}
}

// TestBedrockAgainstMockLLM: `switchyard mockllm` serves the Bedrock paths
// with real event-stream frames the adapter reads.
func TestBedrockAgainstMockLLM(t *testing.T) {
	srv := httptest.NewServer(MockHandler(config.Simulate{TTFB: time.Millisecond, TokensPerSecond: 0, OutputTokens: 4, ErrorStatus: 503, ContextTokens: 50, ContentPolicyWords: []string{"forbidden"}}, 1))
	defer srv.Close()
	p := bedrockProvider(srv.URL)
	a := newBedrockAdapter(t, p)
	d := deployment(p, inferenceProfileARN)
	resp, err := a.Do(context.Background(), d, chatReq(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, wire.FormatOpenAI))
	if err != nil || resp.Usage.CompletionTokens != 4 || !strings.Contains(string(resp.Body), inferenceProfileARN) {
		t.Fatalf("sync %v %s %+v", err, resp.Body, resp.Usage)
	}
	resp, err = a.Do(context.Background(), d, chatReq(t, `{"model":"m","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, wire.FormatAnthropic))
	if err != nil {
		t.Fatal(err)
	}
	all, err := drain(t, resp.Stream)
	if err != nil || !strings.Contains(string(all), "event: message_stop") || resp.Stream.Usage().CompletionTokens != 4 {
		t.Fatalf("stream %v %q %+v", err, all, resp.Stream.Usage())
	}
	_, err = a.Do(context.Background(), d, chatReq(t, `{"model":"m","messages":[{"role":"user","content":"`+strings.Repeat("word ", 200)+`"}]}`, wire.FormatOpenAI))
	wantClass(t, err, routing.ClassContextWindow)
	_, err = a.Do(context.Background(), d, chatReq(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"a forbidden word"}]}`, wire.FormatOpenAI))
	wantClass(t, err, routing.ClassContentPolicy)
}

// TestBedrockCanceledStream: closing the stream ends a blocked Next.
func TestBedrockCanceledStream(t *testing.T) {
	release := make(chan struct{})
	_, srv := newBedrockFake(t, func(w http.ResponseWriter, c *bedrockfake.Call) {
		bedrockfake.WriteFrames(w, bedrockfake.Event("messageStart", `{"role":"assistant"}`),
			bedrockfake.Event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"a"}}`))
		<-release
	})
	defer close(release)
	p := bedrockProvider(srv.URL)
	a := newBedrockAdapter(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := a.Do(ctx, deployment(p, "m"), chatReq(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, wire.FormatOpenAI))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Stream.Next(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := resp.Stream.Next(); done <- err }()
	resp.Stream.Close()
	select {
	case err := <-done:
		wantClass(t, err, routing.ClassCanceled)
	case <-ctx.Done():
		t.Fatal("Next did not return after Close")
	}

	// the client going away mid-stream is a cancellation, never the
	// deployment's fault
	cctx, ccancel := context.WithCancel(ctx)
	resp, err = a.Do(cctx, deployment(p, "m"), chatReq(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, wire.FormatOpenAI))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Stream.Close()
	if _, err := resp.Stream.Next(); err != nil {
		t.Fatal(err)
	}
	go func() { _, err := resp.Stream.Next(); done <- err }()
	ccancel()
	select {
	case err := <-done:
		wantClass(t, err, routing.ClassCanceled)
	case <-ctx.Done():
		t.Fatal("Next did not return after the client went away")
	}
}

// TestBedrockMasksKeyIDs: an AWS error that quotes an access key id (any,
// not only the configured one) is masked after 6 characters (SPEC 15).
func TestBedrockMasksKeyIDs(t *testing.T) {
	h := http.Header{"X-Amzn-Errortype": {"UnrecognizedClientException"}}
	e := newBedrockError(403, h, []byte(`{"message":"The security token for ASIAY34FZKBOKMUTVV7A is invalid"}`))
	if strings.Contains(e.Message, "ASIAY34FZKBOKMUTVV7A") || !strings.Contains(e.Message, "ASIAY3****") || strings.Contains(string(e.body), "KBOKMUTVV7A") {
		t.Fatalf("%q %s", e.Message, e.body)
	}
}

// TestBedrockDefaultEndpoint: without base_url the region picks the
// bedrock-runtime endpoint (SPEC 10), the China partition included.
func TestBedrockDefaultEndpoint(t *testing.T) {
	for region, want := range map[string]string{
		"us-east-1":  "https://bedrock-runtime.us-east-1.amazonaws.com/model/m%3A0/converse",
		"cn-north-1": "https://bedrock-runtime.cn-north-1.amazonaws.com.cn/model/m%3A0/converse",
	} {
		b, err := newBedrock(&catalog.Provider{Provider: config.Provider{Name: "b", Kind: KindBedrock, Region: region, APIKey: "k"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := b.url("m:0", false).String(); got != want {
			t.Errorf("%s: %s, want %s", region, got, want)
		}
	}
}

// TestBedrockUsageAnyNumber: a usage count that is a JSON number but not
// an int (a fraction, an exponent, beyond int64, beyond float64) is
// clamped like any absurd count (SPEC 14), in a sync answer and in a
// stream's closing metadata event: it never turns a complete answer into
// a failure, nor loses the final usage.
func TestBedrockUsageAnyNumber(t *testing.T) {
	var usage string
	_, srv := newBedrockFake(t, func(w http.ResponseWriter, c *bedrockfake.Call) {
		if c.Stream {
			bedrockfake.WriteFrames(w,
				bedrockfake.Event("messageStart", `{"role":"assistant"}`),
				bedrockfake.Event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"hello"}}`),
				bedrockfake.Event("contentBlockStop", `{"contentBlockIndex":0}`),
				bedrockfake.Event("messageStop", `{"stopReason":"end_turn"}`),
				bedrockfake.Event("metadata", `{"usage":`+usage+`,"metrics":{"latencyMs":1}}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[{"text":"hello"}]}},"stopReason":"end_turn","usage":`+usage+`}`)
	})
	p := bedrockProvider(srv.URL)
	a := newBedrockAdapter(t, p)
	d := deployment(p, "anthropic.claude-3-haiku-20240307-v1:0")
	for _, tc := range []struct {
		usage string
		want  Usage
	}{
		{`{"inputTokens":12.0,"outputTokens":3.7,"totalTokens":15.7}`, Usage{PromptTokens: 12, CompletionTokens: 3}},
		{`{"inputTokens":1e3,"outputTokens":2E1,"totalTokens":1.02e3}`, Usage{PromptTokens: 1000, CompletionTokens: 20}},
		{`{"inputTokens":99999999999999999999,"outputTokens":5,"totalTokens":99999999999999999999}`, Usage{PromptTokens: MaxUsageTokens, CompletionTokens: 5}},
		{`{"inputTokens":5,"outputTokens":1e400,"totalTokens":1e400}`, Usage{PromptTokens: 5, CompletionTokens: MaxUsageTokens}},
		{`{"inputTokens":-1e400,"outputTokens":-7.5,"totalTokens":0,"cacheReadInputTokens":1e9}`, Usage{PromptTokens: MaxUsageTokens, CachedTokens: MaxUsageTokens}},
		{`{"inputTokens":null,"outputTokens":4,"totalTokens":4}`, Usage{CompletionTokens: 4}},
	} {
		usage = tc.usage
		for _, f := range []wire.Format{wire.FormatOpenAI, wire.FormatAnthropic} {
			resp, err := a.Do(context.Background(), d, chatReq(t, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, f))
			if err != nil {
				t.Errorf("%s %v sync: %v", tc.usage, f, err)
			} else if resp.Usage != tc.want || !strings.Contains(string(resp.Body), "hello") {
				t.Errorf("%s %v sync: usage %+v, want %+v; body %s", tc.usage, f, resp.Usage, tc.want, resp.Body)
			}
			resp, err = a.Do(context.Background(), d, chatReq(t, `{"model":"m","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, f))
			if err != nil {
				t.Fatalf("%s %v stream: %v", tc.usage, f, err)
			}
			all, err := drain(t, resp.Stream)
			if err != nil || !resp.Stream.Ended() {
				t.Errorf("%s %v stream: ended=%v err=%v after %q", tc.usage, f, resp.Stream.Ended(), err, all)
			} else if u := resp.Stream.Usage(); u != tc.want {
				t.Errorf("%s %v stream: usage %+v, want %+v", tc.usage, f, u, tc.want)
			}
		}
	}
}
