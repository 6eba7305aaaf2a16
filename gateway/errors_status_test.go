package gateway

import (
	"net/http"
	"testing"

	"switchyard/providers"
	"switchyard/routing"
)

// TestFromUpstreamNeverAnswersASuccess: an upstream failure carries the
// upstream's status only when it is an error status; one that came with a
// 2xx (a stream that ended before its first event, an answer that was no
// answer) or none at all is a 502 (504 for a timeout), never a 200 with an
// error body a client would read as a success (SPEC 14).
func TestFromUpstreamNeverAnswersASuccess(t *testing.T) {
	for _, c := range []struct {
		status int
		class  routing.Class
		want   int
	}{
		{200, routing.ClassServerError, http.StatusBadGateway},
		{204, routing.ClassServerError, http.StatusBadGateway},
		{302, routing.ClassServerError, http.StatusBadGateway},
		{200, routing.ClassTimeout, http.StatusGatewayTimeout},
		{0, routing.ClassServerError, http.StatusBadGateway},
		{700, routing.ClassServerError, http.StatusBadGateway},
		{503, routing.ClassServerError, http.StatusServiceUnavailable},
		{429, routing.ClassRateLimited, http.StatusTooManyRequests},
		{400, routing.ClassBadRequest, http.StatusBadRequest},
	} {
		e := fromUpstream(&providers.Error{Status: c.status, Class: c.class, Message: "m"}, false)
		if e.Status != c.want {
			t.Errorf("upstream status %d (%v): answered %d, want %d", c.status, c.class, e.Status, c.want)
		}
	}
}
