package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// fakeServer drains at once, or (long) like a server with a stream still
// open: Shutdown returns only when its deadline passes.
type fakeServer struct {
	long   bool
	closed bool
}

func (f *fakeServer) Shutdown(ctx context.Context) error {
	if !f.long {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (f *fakeServer) Close() error { f.closed = true; return nil }

func (f *fakeServer) Wait(context.Context) int { return 0 } // no handler runs

// TestGracefulStopFlushesAfterALongDrain: a drain that used all its time
// (a stream longer than it, common for LLM answers) still leaves the flush
// of the node's pending writes (usage, spend, audit) a live deadline of its
// own, and the connections still open are closed before that flush.
func TestGracefulStopFlushesAfterALongDrain(t *testing.T) {
	for _, tc := range []struct {
		name       string
		long       bool
		wantClosed bool
	}{
		{"drained", false, false},
		{"drain timed out", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &fakeServer{long: tc.long}
			var flushErr error
			flushed := false
			flush := func(ctx context.Context) error {
				flushed = true
				flushErr = ctx.Err() // a flush with an expired deadline sends nothing
				if _, ok := ctx.Deadline(); !ok {
					t.Error("the flush has no deadline: a Redis that is down would hang the stop")
				}
				return flushErr
			}
			b := stopBounds{drain: time.Millisecond, flush: time.Minute}
			code := gracefulStop(srv, flush, b, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if !flushed || flushErr != nil {
				t.Fatalf("flushed %v with deadline error %v: pending writes lost", flushed, flushErr)
			}
			if code != 0 {
				t.Errorf("exit code %d, want 0", code)
			}
			if srv.closed != tc.wantClosed {
				t.Errorf("connections closed after the drain: %v, want %v", srv.closed, tc.wantClosed)
			}
		})
	}
}

// TestUsageNamesMockFormats: `switchyard help` names every wire format
// mockllm serves (SPEC 13), as the README's command table does.
func TestUsageNamesMockFormats(t *testing.T) {
	code, out, _ := runCLI(t, "", "help")
	if code != 0 {
		t.Fatalf("help exit %d", code)
	}
	for _, want := range []string{"OpenAI", "Anthropic", "Gemini", "Vertex", "Bedrock"} {
		if !strings.Contains(out, want) {
			t.Errorf("usage does not name mockllm's %s format:\n%s", want, out)
		}
	}
}
