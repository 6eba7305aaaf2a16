package providers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"switchyard/redact"
	"switchyard/routing"
	"switchyard/wire"
)

// bedrockByType classifies an AWS error by its type name, before the HTTP
// status (SPEC 10 `bedrock`, 7.4): Bedrock answers ModelNotReadyException
// with 429 and ModelErrorException with 424, and both are the deployment's
// trouble, not a quota or the request's. Names follow the Bedrock Runtime
// API reference's Converse "Errors" section plus the AWS common errors.
var bedrockByType = map[string]routing.Class{
	"ThrottlingException":                 routing.ClassRateLimited,
	"TooManyRequestsException":            routing.ClassRateLimited,
	"ServiceQuotaExceededException":       routing.ClassRateLimited,
	"AccessDeniedException":               routing.ClassAuth,
	"UnrecognizedClientException":         routing.ClassAuth,
	"InvalidSignatureException":           routing.ClassAuth,
	"IncompleteSignatureException":        routing.ClassAuth,
	"MissingAuthenticationTokenException": routing.ClassAuth,
	"ExpiredTokenException":               routing.ClassAuth,
	"InvalidClientTokenId":                routing.ClassAuth,
	"ResourceNotFoundException":           routing.ClassNotFound,
	"ModelTimeoutException":               routing.ClassTimeout,
	"ServiceUnavailableException":         routing.ClassServerError,
	"ModelNotReadyException":              routing.ClassServerError,
	"InternalServerException":             routing.ClassServerError,
	"ModelStreamErrorException":           routing.ClassServerError,
	"ModelErrorException":                 routing.ClassServerError,
}

// bedrockContextPhrases mark a ValidationException about the input's
// length: a context-window error, not any bad request.
var bedrockContextPhrases = []string{"too long", "input length", "context", "too many input tokens", "too many tokens"}

// bedrockErrorType normalizes an AWS error type: the x-amzn-errortype
// header ("ThrottlingException:http://internal.amazon.com/...") or the
// body's __type ("com.amazonaws.bedrock#ThrottlingException"), and the
// lower-camel name of a stream exception ("throttlingException").
func bedrockErrorType(t string) string {
	t = strings.TrimSpace(t)
	if i := strings.IndexByte(t, ':'); i >= 0 {
		t = t[:i]
	}
	if i := strings.LastIndexByte(t, '#'); i >= 0 {
		t = t[i+1:]
	}
	if t != "" && t[0] >= 'a' && t[0] <= 'z' {
		t = string(t[0]-'a'+'A') + t[1:]
	}
	return t
}

// bedrockClass is the one classification of a Bedrock failure: its type
// first, then a ValidationException's message, then the status alone.
func bedrockClass(status int, typ, msg string) routing.Class {
	if c, ok := bedrockByType[typ]; ok {
		return c
	}
	if typ == "ValidationException" || (typ == "" && (status == 400 || status == 413)) {
		lower := strings.ToLower(msg)
		for _, p := range bedrockContextPhrases {
			if strings.Contains(lower, p) {
				return routing.ClassContextWindow
			}
		}
		if typ == "ValidationException" {
			return routing.ClassBadRequest
		}
	}
	for _, sr := range commonStatuses {
		if status >= sr.lo && status <= sr.hi {
			return sr.class
		}
	}
	return routing.ClassServerError
}

// bedrockErrorBody reads an AWS JSON error body: {"message"} or
// {"Message"}, with an optional "__type".
func bedrockErrorBody(body []byte) (typ, msg string) {
	var e struct {
		Type     string `json:"__type"`
		Message  string `json:"message"`
		MessageU string `json:"Message"`
	}
	body = bytes.TrimSpace(body)
	if json.Unmarshal(body, &e) != nil {
		return "", wire.Truncate(string(body), 512)
	}
	if e.Message == "" {
		e.Message = e.MessageU
	}
	return e.Type, e.Message
}

// newBedrockError classifies a non-2xx Bedrock response once.
func newBedrockError(status int, h http.Header, body []byte) *Error {
	bt, msg := bedrockErrorBody(body)
	typ := bedrockErrorType(h.Get("X-Amzn-Errortype"))
	if typ == "" {
		typ = bedrockErrorType(bt)
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	class := bedrockClass(status, typ, msg) // on the whole message
	b := errorInfo{Type: typ, Message: msg}.bounded()
	typ, msg = b.Type, b.Message
	return &Error{Status: status, Class: class, Type: typ, Message: redact.Credentials(msg),
		RetryAfter: parseRetryAfter(h, time.Now()), body: []byte(redact.Credentials(string(body)))}
}

// bedrockStreamException is an exception event of a ConverseStream: it
// ends the stream as its class (SPEC 10).
func bedrockStreamException(exceptionType string, payload []byte) *Error {
	typ := bedrockErrorType(exceptionType)
	_, msg := bedrockErrorBody(payload)
	if msg == "" {
		msg = "upstream sent " + exceptionType + " mid-stream"
	}
	b := errorInfo{Type: typ, Message: msg}.bounded() // classified on the whole message
	e := &Error{Class: bedrockClass(0, typ, msg), Type: b.Type, Message: redact.Credentials(b.Message)}
	// the status the exception carries in the API reference, so a client
	// that gets it as the last error sees 429 or 400 rather than 502
	switch e.Class {
	case routing.ClassRateLimited:
		e.Status = http.StatusTooManyRequests
	case routing.ClassContextWindow, routing.ClassBadRequest:
		e.Status = http.StatusBadRequest
	}
	return e
}
