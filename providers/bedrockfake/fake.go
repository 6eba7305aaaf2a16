// Package bedrockfake is a fake Amazon Bedrock Runtime for tests: it serves
// POST /model/{modelId}/converse and /converse-stream, checks each
// request's SigV4 signature by signing the received request again with the
// same credentials (or checks a Bearer API key), records the calls, and
// answers what the test scripts, stream frames encoded with the AWS SDK's
// event-stream encoder. It is test support only; nothing in the gateway
// imports it.
package bedrockfake

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Call is one request the fake received.
type Call struct {
	EscapedPath string // as it arrived on the wire
	ModelID     string // unescaped
	Stream      bool
	Body        []byte
	Header      http.Header
}

// Frame is one event-stream frame to send: an event (Type "event",
// Name the :event-type) or an exception (Type "exception", Name the
// :exception-type).
type Frame struct {
	Type, Name string
	Payload    string
}

// Event is an event frame.
func Event(name, payload string) Frame { return Frame{Type: "event", Name: name, Payload: payload} }

// Exception is an exception frame with {"message": msg}.
func Exception(name, msg string) Frame {
	b, _ := json.Marshal(map[string]string{"message": msg})
	return Frame{Type: "exception", Name: name, Payload: string(b)}
}

// Server is the fake. Set Creds (SigV4) or APIKey (Bearer) before use.
type Server struct {
	Creds  aws.Credentials // the credentials a request must be signed with
	Region string          // default us-east-1
	APIKey string          // when set, Authorization must be "Bearer " + APIKey
	// Answer writes the answer to a verified call; nil answers a short
	// text. It runs on the server's goroutine.
	Answer func(w http.ResponseWriter, c *Call)

	mu    sync.Mutex
	calls []Call
}

// Calls returns the verified calls so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		WriteError(w, http.StatusBadRequest, "ValidationException", "unreadable body")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/model/")
	i := strings.LastIndexByte(rest, '/')
	if !ok || i <= 0 || r.Method != http.MethodPost || (rest[i+1:] != "converse" && rest[i+1:] != "converse-stream") {
		WriteError(w, http.StatusNotFound, "UnknownOperationException", "unknown operation")
		return
	}
	model, err := url.PathUnescape(rest[:i])
	if err != nil {
		WriteError(w, http.StatusBadRequest, "ValidationException", "bad model id")
		return
	}
	if typ, msg := s.verify(r, body); typ != "" {
		WriteError(w, http.StatusForbidden, typ, msg)
		return
	}
	if msg := validate(body); msg != "" {
		WriteError(w, http.StatusBadRequest, "ValidationException", msg)
		return
	}
	c := Call{EscapedPath: r.URL.EscapedPath(), ModelID: model, Stream: rest[i+1:] == "converse-stream", Body: body, Header: r.Header.Clone()}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
	w.Header().Set("X-Amzn-Requestid", "fake-req-1")
	if s.Answer != nil {
		s.Answer(w, &c)
		return
	}
	if c.Stream {
		WriteFrames(w,
			Event("messageStart", `{"role":"assistant"}`),
			Event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hello"}}`),
			Event("contentBlockStop", `{"contentBlockIndex":0}`),
			Event("messageStop", `{"stopReason":"end_turn"}`),
			Event("metadata", `{"usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4},"metrics":{"latencyMs":1}}`))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[{"text":"Hello"}]}},"stopReason":"end_turn","usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4},"metrics":{"latencyMs":1}}`)
}

// verify checks the request's credential: the Bearer key, or a SigV4
// signature recomputed over the received method, escaped path, query,
// signed headers and body with the fake's own credentials. It returns the
// AWS error type and message of a refusal, or "".
func (s *Server) verify(r *http.Request, body []byte) (string, string) {
	auth := r.Header.Get("Authorization")
	if s.APIKey != "" {
		if auth != "Bearer "+s.APIKey {
			return "UnrecognizedClientException", "The security token included in the request is invalid."
		}
		return "", ""
	}
	region := s.Region
	if region == "" {
		region = "us-east-1"
	}
	const algo = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(auth, algo) {
		return "MissingAuthenticationTokenException", "Missing Authentication Token"
	}
	var signed []string
	for _, part := range strings.Split(strings.TrimPrefix(auth, algo), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			if !strings.HasSuffix(v, "/"+region+"/bedrock/aws4_request") {
				return "InvalidSignatureException", "Credential should be scoped to a valid region and service bedrock."
			}
		case "SignedHeaders":
			signed = strings.Split(v, ";")
		}
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "IncompleteSignatureException", "X-Amz-Date is missing or malformed"
	}
	again, err := http.NewRequest(r.Method, "http://"+r.Host+r.RequestURI, bytes.NewReader(body))
	if err != nil {
		return "InvalidSignatureException", "unparsable request URI"
	}
	for _, h := range signed {
		if h == "host" {
			continue
		}
		again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(r.Context(), s.Creds, again, hex.EncodeToString(sum[:]), "bedrock", region, at); err != nil {
		return "InvalidSignatureException", err.Error()
	}
	if again.Header.Get("Authorization") != auth {
		return "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."
	}
	return "", ""
}

// WriteError writes an AWS JSON error as Bedrock does.
func WriteError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"message": msg})
	w.Write(b)
}

// WriteFrames writes a converse-stream answer, flushing after each frame.
func WriteFrames(w http.ResponseWriter, frames ...Frame) {
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	enc := eventstream.NewEncoder()
	rc := http.NewResponseController(w)
	for _, f := range frames {
		if enc.Encode(w, Encode(f)) != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// Encode is f as an event-stream message.
func Encode(f Frame) eventstream.Message {
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue(f.Type))
	if f.Type == "exception" {
		h.Set(":exception-type", eventstream.StringValue(f.Name))
	} else {
		h.Set(":event-type", eventstream.StringValue(f.Name))
	}
	h.Set(":content-type", eventstream.StringValue("application/json"))
	return eventstream.Message{Headers: h, Payload: []byte(f.Payload)}
}

// Bytes encodes frames into one event-stream body.
func Bytes(frames ...Frame) []byte {
	var buf bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, f := range frames {
		_ = enc.Encode(&buf, Encode(f))
	}
	return buf.Bytes()
}

// validate checks what Bedrock refuses of a Converse body before it calls
// a model, as far as a test relies on it, and returns its message ("" when
// the body passes): the Converse API reference says toolConfig "must be
// defined" when the messages hold toolUse or toolResult blocks.
func validate(body []byte) string {
	var req struct {
		Messages []struct {
			Content []map[string]json.RawMessage `json:"content"`
		} `json:"messages"`
		ToolConfig json.RawMessage `json:"toolConfig"`
	}
	if json.Unmarshal(body, &req) != nil {
		return "Malformed input request, please reformat your input and try again."
	}
	if len(req.ToolConfig) > 0 && string(req.ToolConfig) != "null" {
		return ""
	}
	for _, m := range req.Messages {
		for _, b := range m.Content {
			if b["toolUse"] != nil || b["toolResult"] != nil {
				return "The toolConfig field must be defined when using toolUse and toolResult content blocks."
			}
		}
	}
	return ""
}
