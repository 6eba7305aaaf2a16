package gateway

import (
	"errors"
	"net/http"
	"strconv"
	"time"

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
		return errBadRequest(we.Param, we.Message)
	}
	return errBadRequest("", err.Error())
}

// fromUpstream maps the last upstream failure to the client's status and
// body (SPEC 7.3, 14): the upstream status when there was one, 502 when
// none arrived, 504 on the request deadline.
func fromUpstream(err error, deadline bool) *apiError {
	if deadline {
		return &apiError{Status: http.StatusGatewayTimeout, Type: "timeout", Code: "request_timeout",
			Message: "the request deadline (server.request_timeout) passed before an upstream answered"}
	}
	var pe *providers.Error
	if errors.As(err, &pe) {
		status := pe.Status
		typ := pe.Type
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
	case 400, 413:
		return "invalid_request_error"
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
	return "api_error"
}

// body renders the error in the client's format (wire.AppendError: the
// module's one error shape).
func (e *apiError) body(format wire.Format) []byte {
	typ := e.Type
	if format == wire.FormatAnthropic {
		typ = anthropicType(e)
	}
	return wire.AppendError(make([]byte, 0, 128+len(e.Message)), format,
		wire.ErrorBody{Type: typ, Code: e.Code, Param: e.Param, Message: e.Message})
}

// streamEvent renders the error as one SSE event in the client's stream
// format, for a failure after the first byte (SPEC 7.1).
func (e *apiError) streamEvent(format wire.Format) []byte {
	if format == wire.FormatAnthropic {
		out := append([]byte("event: error\ndata: "), e.body(format)...)
		return append(out, "\n\n"...)
	}
	out := append([]byte("data: "), e.body(format)...)
	return append(out, "\n\ndata: [DONE]\n\n"...)
}
