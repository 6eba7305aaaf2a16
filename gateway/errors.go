package gateway

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"switchyard/providers"
	"switchyard/routing"
	"switchyard/wire"
)

// apiError is every error the gateway answers with (SPEC 14). It is
// written in the OpenAI shape, or the Anthropic shape on /v1/messages.
type apiError struct {
	Status     int
	Type       string
	Code       string
	Param      string
	Message    string
	RetryAfter time.Duration
}

func (e *apiError) Error() string { return e.Message }

func errBadRequest(param, msg string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: msg}
}

func errTooLarge(limit int64) *apiError {
	return &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
		Message: "request body is larger than server.max_body_bytes (" + strconv.FormatInt(limit, 10) + " bytes): send a smaller body"}
}

var (
	errNoKey = &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: "missing API key: send it as \"Authorization: Bearer <key>\" or \"x-api-key: <key>\""}
	errBadKey = &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: "invalid API key: no team has this key"}
)

func errNotAllowed(model string) *apiError {
	return &apiError{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "model_not_allowed", Param: "model",
		Message: "model \"" + model + "\" is not in your team's allowlist: ask the operator to add it to teams[].models"}
}

func errModelNotFound(model string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found", Param: "model",
		Message: "model \"" + model + "\" does not exist or has no enabled deployment for this operation: GET /v1/models lists what you can call"}
}

// fromInputError maps a wire parse problem to 400.
func fromInputError(err error) *apiError {
	var we *wire.Error
	if errors.As(err, &we) {
		e := errBadRequest(we.Param, we.Message)
		e.Code = we.Code
		return e
	}
	return errBadRequest("", err.Error())
}

// errUpstreamAuth answers an upstream 401/403 (SPEC 15): the operator's
// credential was refused, which the client can neither fix nor should take
// for its own key being wrong; the upstream's text (which may quote the
// credential) is never relayed.
var errUpstreamAuth = &apiError{Status: http.StatusBadGateway, Type: "upstream_auth_error", Code: "upstream_auth_error",
	Message: "the upstream provider refused the gateway's credentials; this is a gateway configuration problem, not your API key: contact the operator"}

// fromUpstream maps the last upstream failure to the client's status and
// body (SPEC 7.3, 14): the upstream status when there was one, 502 when
// none arrived or it was a 401/403, 504 on the request deadline.
func fromUpstream(err error, deadline bool) *apiError {
	if deadline {
		return &apiError{Status: http.StatusGatewayTimeout, Type: "timeout", Code: "request_timeout",
			Message: "the request deadline (server.request_timeout) passed before an upstream answered"}
	}
	var pe *providers.Error
	if errors.As(err, &pe) && pe.Class == routing.ClassAuth {
		return errUpstreamAuth
	}
	if errors.As(err, &pe) {
		status := pe.Status
		typ := pe.Type
		if status < 400 || status > 599 {
			// no error status arrived: an upstream's 2xx that failed (a
			// stream that ended before its first event, a body that was
			// no answer) is a failure the client must not read as a
			// success (SPEC 14)
			status = 0
		}
		if status == 0 {
			status = http.StatusBadGateway
			if pe.Class == routing.ClassTimeout {
				status = http.StatusGatewayTimeout
			}
		}
		if typ == "" {
			typ = upstreamType(pe.Class)
		}
		msg := pe.Message
		if msg == "" {
			msg = "upstream failed: " + pe.Class.String()
		}
		return &apiError{Status: status, Type: typ, Code: pe.Code, Message: msg}
	}
	if err == nil {
		return &apiError{Status: http.StatusBadGateway, Type: "upstream_error", Code: "no_upstream",
			Message: "no deployment could serve the request"}
	}
	return &apiError{Status: http.StatusBadGateway, Type: "upstream_error", Message: err.Error()}
}

func upstreamType(c routing.Class) string {
	switch c {
	case routing.ClassRateLimited:
		return "rate_limit_exceeded"
	case routing.ClassContextWindow, routing.ClassContentPolicy, routing.ClassBadRequest:
		return "invalid_request_error"
	case routing.ClassAuth:
		return "upstream_auth_error"
	}
	return "upstream_error"
}

// anthropicType maps an error to the Anthropic error type names.
func anthropicType(e *apiError) string {
	switch e.Status {
	case 400:
		return "invalid_request_error"
	case 413:
		return "request_too_large" // the Messages API's type for its 413
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 429:
		return "rate_limit_error"
	case 529, 503:
		return "overloaded_error"
	}
	if e.Status >= 400 && e.Status < 500 {
		// "other 4XX status codes not listed" (408, 409, 415, 422 ...) are
		// invalid_request_error; api_error is an internal failure
		// (docs.claude.com/en/api/errors)
		return "invalid_request_error"
	}
	return "api_error"
}

// body renders the error in the client's format (wire.AppendError: the
// module's one error shape).
func (e *apiError) body(format wire.Format) []byte { return e.bodyWithID(format, "") }

// bodyWithID is body carrying the request's id, which the Anthropic shape
// has as its top-level request_id (docs.claude.com/en/api/errors).
func (e *apiError) bodyWithID(format wire.Format, reqID string) []byte {
	typ := e.Type
	if format == wire.FormatAnthropic {
		typ = anthropicType(e)
	}
	return wire.AppendError(make([]byte, 0, 160+len(e.Message)), format,
		wire.ErrorBody{Type: typ, Code: e.Code, Param: e.Param, Message: e.Message, RequestID: reqID})
}

// streamEvent renders the error as one SSE event in the client's stream
// format, for a failure after the first byte (SPEC 7.1). seq is the
// Responses stream's next sequence_number (the events relayed before it
// count from 0, SPEC 10.1); other formats have none.
func (e *apiError) streamEvent(format wire.Format, seq int64) []byte {
	if format == wire.FormatAnthropic {
		out := append([]byte("event: error\ndata: "), e.body(format)...)
		return append(out, "\n\n"...)
	}
	if format == wire.FormatResponses {
		// the Responses stream's error event (no top-level "error" key)
		b := append([]byte("event: error\ndata: {\"type\":\"error\",\"code\":"), wire.AppendString(nil, e.Code)...)
		b = append(b, `,"message":`...)
		b = wire.AppendString(b, e.Message)
		b = strconv.AppendInt(append(b, ",\"param\":null,\"sequence_number\":"...), seq, 10)
		return append(b, "}\n\n"...)
	}
	out := append([]byte("data: "), e.body(format)...)
	return append(out, "\n\ndata: [DONE]\n\n"...)
}

// maxUsefulRetry is the longest Retry-After an SDK's own retry can wait
// out: the OpenAI and Anthropic SDKs honour at most about a minute and
// retry sooner otherwise, which cannot succeed.
const maxUsefulRetry = time.Minute

// shouldNotRetry reports a 429 that no retry can fix soon (a wait longer
// than maxUsefulRetry, an exhausted budget's included): the response then
// says x-should-retry: false, which the SDKs obey. A budget whose period
// resets within the minute is retried (SPEC 3.1: "when that is over 60 s").
func (e *apiError) shouldNotRetry() bool {
	return e.Status == http.StatusTooManyRequests && e.RetryAfter > maxUsefulRetry
}

// writeErrorFormat is the module's one error writer: e in the client's
// format (wire.AppendError) with Retry-After and x-should-retry.
func writeErrorFormat(c *gin.Context, e *apiError, format wire.Format) {
	if e.RetryAfter > 0 {
		secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
		c.Header("Retry-After", strconv.FormatInt(secs, 10))
	}
	if e.shouldNotRetry() {
		c.Header("X-Should-Retry", "false")
	}
	// the id every response carries (SPEC 10), set before the error is written
	c.Data(e.Status, "application/json", e.bodyWithID(format, c.Writer.Header().Get("X-Request-Id")))
}

// writeError writes e in the OpenAI format.
func writeError(c *gin.Context, e *apiError) { writeErrorFormat(c, e, wire.FormatOpenAI) }

// errInternal answers a handler that panicked.
var errInternal = &apiError{Status: http.StatusInternalServerError, Type: "internal_error", Code: "internal_error",
	Message: "internal error: the gateway failed on this request; it is logged under its X-Request-Id"}
