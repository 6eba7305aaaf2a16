package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"switchyard/node"
)

// brokenListener fails every Accept, as a listener that breaks at runtime
// does: http.Server.Serve returns the error.
type brokenListener struct{ net.Listener }

func (brokenListener) Accept() (net.Conn, error) {
	return nil, errors.New("accept: the listener broke")
}

// TestServeFailureClosesTheNode: a server that fails at runtime (its
// listener broke) exits 1 and still closes the node: heartbeat left,
// pending usage, spend and audit sent.
func TestServeFailureClosesTheNode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		broken string // which listener breaks: "main" or "metrics"
	}{
		{"main listener breaks", "main"},
		{"metrics listener breaks", "metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := miniredis.RunT(t)
			cfg := exitConfig(t, m, "127.0.0.1:0", "localhost:0")
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			n, err := node.Assemble(cfg, node.Options{Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			// serveNode listens on server.listen first, then on
			// server.metrics_listen
			calls := 0
			listen := func(network, addr string) (net.Listener, error) {
				calls++
				ln, err := net.Listen(network, addr)
				if err != nil || (calls == 1) != (tc.broken == "main") {
					return ln, err
				}
				return brokenListener{ln}, nil
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if code := serveNode(ctx, cfg, n, listen, stopBounds{drain: time.Second, flush: 5 * time.Second}, log, nil); code != 1 {
				t.Fatalf("exit code %d, want 1", code)
			}
			assertNodeClosed(t, m)
		})
	}
}

// TestGracefulStopFlushesAfterTheHandlers: after a drain that timed out,
// Close ends the connections but does not wait for their handlers; the
// flush of the node's pending writes must come after those handlers
// returned (their Finish queues the usage, spend and audit it sends), and a
// handler that never returns must not hold the stop past its bound.
func TestGracefulStopFlushesAfterTheHandlers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stuck bool // the handler never returns
	}{
		{"handler returns once its connection is closed", false},
		{"handler stuck forever", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entered, cancelled := make(chan struct{}), make(chan struct{})
			gate, stuck := make(chan struct{}), make(chan struct{})
			defer close(stuck)
			var returned atomic.Bool
			hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(entered)
				<-r.Context().Done() // a stream the drain did not see end: Close cancels it
				close(cancelled)
				if tc.stuck {
					<-stuck
				} else {
					<-gate // the handler's last steps (its Finish) take a moment
				}
				returned.Store(true)
			})}
			srv := newServer(hs)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = hs.Serve(ln) }()
			go func() {
				if resp, err := http.Get("http://" + ln.Addr().String()); err == nil {
					resp.Body.Close()
				}
			}()
			<-entered

			flushed := make(chan struct{})
			var sawReturned bool
			var flushErr error
			flush := func(ctx context.Context) error {
				sawReturned, flushErr = returned.Load(), ctx.Err()
				close(flushed)
				return nil
			}
			b := stopBounds{drain: 20 * time.Millisecond, flush: 2 * time.Second}
			start := time.Now()
			code := make(chan int, 1)
			go func() { code <- gracefulStop(srv, flush, b, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
			<-cancelled
			// a stop that flushes while the handler runs does so at once;
			// one that waits for it does not flush until it returns
			select {
			case <-flushed:
			case <-time.After(200 * time.Millisecond):
			}
			close(gate)
			select {
			case c := <-code:
				if c != 0 {
					t.Errorf("exit code %d, want 0", c)
				}
			case <-time.After(b.drain + b.flush + 5*time.Second):
				t.Fatal("the stop is held by a handler past its bound")
			}
			<-flushed
			if flushErr != nil {
				t.Errorf("the flush got an expired context (%v): it sends nothing", flushErr)
			}
			if !tc.stuck && !sawReturned {
				t.Error("flushed while a handler was still running: its usage, spend and audit miss the flush")
			}
			if tc.stuck && time.Since(start) > b.drain+b.flush {
				t.Errorf("the stop took %s with a stuck handler, bound %s", time.Since(start), b.drain+b.flush)
			}
		})
	}
}
