package gateway

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"switchyard/wire"
)

// anthropicErrorType decodes an Anthropic error body (docs.claude.com
// /en/api/errors, "Error shapes": {"type":"error","error":{"type",
// "message"}}) and returns error.type; "" when the body is not that shape.
func anthropicErrorType(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Type != "error" || e.Error.Message == "" {
		return ""
	}
	return e.Error.Type
}

// SPEC 14: on /v1/messages every error is in the Anthropic shape. A path
// under /v1/messages that the gateway does not serve (the Message Batches
// API, /v1/messages/batches, which the Anthropic SDKs call as
// client.messages.batches), or a method it does not serve there, was
// answered by the catch-all 404 in the OpenAI shape, which the Anthropic
// SDKs do not read as their error (error.type missing). The OpenAI paths
// keep the OpenAI shape.
func TestHostile5UnknownPathUnderMessagesIsAnthropicShaped(t *testing.T) {
	n := newTestNode(t, simYAML)
	for _, tc := range []struct{ method, path string }{
		{"POST", "/v1/messages/batches"},
		{"GET", "/v1/messages/batches/msgbatch_01"},
		{"GET", "/v1/messages"},
	} {
		w := do(t, n.Handler(), tc.method, tc.path, testKey, `{}`)
		if w.Code != http.StatusNotFound {
			t.Errorf("%s %s: status %d, want 404", tc.method, tc.path, w.Code)
		}
		if got := anthropicErrorType(t, w.Body.Bytes()); got != "not_found_error" {
			t.Errorf("%s %s: body %s, want the Anthropic shape with error.type not_found_error", tc.method, tc.path, w.Body)
		}
		if w.Header().Get("Request-Id") == "" {
			t.Errorf("%s %s: no request-id header", tc.method, tc.path)
		}
	}
	w := do(t, n.Handler(), "POST", "/v1/chat/completionz", testKey, `{}`)
	var oa struct {
		Error struct{ Type, Code string } `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &oa); err != nil || w.Code != 404 || oa.Error.Code != "unknown_url" {
		t.Errorf("an unknown OpenAI path: %d %s, want 404 in the OpenAI shape", w.Code, w.Body)
	}
}

// docs.claude.com/en/api/errors, "HTTP errors": invalid_request_error is
// the type of 400 "and other 4XX status codes not listed below" (the list
// names 401, 403, 404, 413 and 429); api_error is the 500's, an
// unexpected internal error. The gateway's 408 (a body that did not arrive
// within server.read_timeout), 415 and an upstream's 409 or 422 relayed on
// /v1/messages said api_error: the client's own request, read as a
// server fault.
func TestHostile5AnthropicTypeOfOther4xx(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   string
	}{
		{400, "invalid_request_error"},
		{401, "authentication_error"},
		{403, "permission_error"},
		{404, "not_found_error"},
		{408, "invalid_request_error"},
		{409, "invalid_request_error"},
		{413, "request_too_large"},
		{415, "invalid_request_error"},
		{422, "invalid_request_error"},
		{429, "rate_limit_error"},
		{500, "api_error"},
		{502, "api_error"},
		{503, "overloaded_error"},
		{504, "api_error"},
		{529, "overloaded_error"},
	} {
		e := &apiError{Status: tc.status, Type: "whatever", Message: "m"}
		if got := anthropicErrorType(t, e.body(wire.FormatAnthropic)); got != tc.want {
			t.Errorf("status %d: Anthropic error.type %q, want %q", tc.status, got, tc.want)
		}
	}
}

// A request body sent with Content-Encoding: gzip (or any coding but
// identity) was parsed as it came, and the client was told its JSON is
// invalid ("invalid character '\x1f'"), for a body that is valid JSON once
// decoded. RFC 9110 section 8.4 / 15.5.16 and RFC 7694: a content coding
// the server does not accept is 415, and the response's Accept-Encoding
// says which codings it does accept. Anthropic-shaped on /v1/messages.
func TestHostile5EncodedBodyIs415(t *testing.T) {
	n := newTestNode(t, simYAML)
	gz := func(s string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write([]byte(s))
		_ = zw.Close()
		return b.Bytes()
	}
	post := func(path, encoding string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("Content-Type", "application/json")
		if encoding != "" {
			req.Header.Set("Content-Encoding", encoding)
		}
		w := httptest.NewRecorder()
		n.Handler().ServeHTTP(w, req)
		return w
	}
	chat := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for _, enc := range []string{"gzip", "br", "deflate", "GZIP"} {
		w := post("/v1/chat/completions", enc, gz(chat))
		if w.Code != http.StatusUnsupportedMediaType {
			t.Errorf("Content-Encoding %s: status %d %s, want 415", enc, w.Code, w.Body)
			continue
		}
		if !strings.Contains(w.Body.String(), `"code":"unsupported_content_encoding"`) {
			t.Errorf("Content-Encoding %s: body %s", enc, w.Body)
		}
		if got := w.Header().Get("Accept-Encoding"); got != "identity" {
			t.Errorf("Content-Encoding %s: Accept-Encoding %q, want identity", enc, got)
		}
	}
	w := post("/v1/messages", "gzip", gz(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	if w.Code != http.StatusUnsupportedMediaType || anthropicErrorType(t, w.Body.Bytes()) != "invalid_request_error" {
		t.Errorf("/v1/messages gzip: %d %s, want 415 invalid_request_error in the Anthropic shape", w.Code, w.Body)
	}
	// identity is no coding at all
	if w := post("/v1/chat/completions", "identity", []byte(chat)); w.Code != http.StatusOK {
		t.Errorf("Content-Encoding identity: %d %s", w.Code, w.Body)
	}
	// the key is still checked first: no key, 401, whatever the coding
	req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(gz(chat)))
	req.Header.Set("Content-Encoding", "gzip")
	rw := httptest.NewRecorder()
	n.Handler().ServeHTTP(rw, req)
	if rw.Code != http.StatusUnauthorized {
		t.Errorf("no key, gzip: %d, want 401", rw.Code)
	}
}
