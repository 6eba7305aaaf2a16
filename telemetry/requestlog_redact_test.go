package telemetry

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"switchyard/redact"
)

// TestRequestLineMasksCredentials: the request line written straight to
// the log's writer masks what is shaped like a credential (SPEC 15: every
// log line), as the serving logger's redact handler does for every other
// line and for this one when it goes through the logger. The client
// chooses the request id (X-Request-Id) and the model name it sends; a key
// pasted into either used to reach the log in clear.
func TestRequestLineMasksCredentials(t *testing.T) {
	const key = "sk-proj-Zq3xV8mN2pL7rT4wY9kH6cB1"
	const bearer = "Bearer eyJhbGciOiJIUzI1NiJ9abcdefgh"
	end := time.Date(2026, 12, 1, 13, 4, 5, 6, time.UTC)
	cases := []struct {
		name string
		e    *Entry
	}{
		{"requested model", &Entry{RequestID: "r-1", Team: "t", RequestedModel: key, Status: 404}},
		{"request id", &Entry{RequestID: bearer, Team: "t", RequestedModel: "m", Status: 200}},
		{"error", &Entry{RequestID: "r-3", Team: "t", RequestedModel: "m", Status: 502, Error: "upstream: invalid key " + key}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var lines, logged bytes.Buffer
			// the serving process's logger (cmd/switchyard serveLogger)
			log := slog.New(redact.Handler(slog.NewJSONHandler(&logged, nil)))
			NewRequestLog(log, &lines).Write(tc.e, end)
			got := lines.String()
			for _, secret := range []string{key, bearer, "Zq3xV8mN2pL7", "eyJhbGciOiJIUzI1NiJ9"} {
				if strings.Contains(got, secret) {
					t.Fatalf("the request line holds %q in clear:\n%s", secret, got)
				}
			}
			NewRequestLog(log, nil).Write(tc.e, end)
			if got != logged.String() {
				t.Fatalf("the direct line differs from the logger's:\n got %s\nwant %s", got, logged.String())
			}
		})
	}
}
