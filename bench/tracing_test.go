package bench

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"switchyard/config"
	"switchyard/gateway"
	"switchyard/internal/otlptest"
)

// BenchmarkTracing is the in-process chat path (as BenchmarkChatInProcess
// shuffle) with tracing off, on against a collector that answers (and
// discards: the receiver's decoding is not the gateway's cost), on
// against one that holds every export (slow), and on against a port where
// nothing listens (gone). Read the on/off ns/op ratio; the slow and gone
// cases must match "on" within noise (a request never waits for the
// collector), and dropped/op shows the spans lost instead (SPEC 12.5).
func BenchmarkTracing(b *testing.B) {
	gone := closedPort(b)
	for _, tc := range []struct {
		name string
		rcv  func(*otlptest.Receiver)
		url  func(*otlptest.Receiver) string
	}{
		{"off", nil, func(*otlptest.Receiver) string { return "" }},
		{"on", (*otlptest.Receiver).Discard, (*otlptest.Receiver).URL},
		{"collector-slow", (*otlptest.Receiver).Hold, (*otlptest.Receiver).URL},
		{"collector-gone", nil, func(*otlptest.Receiver) string { return gone }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rcv := otlptest.New()
			defer rcv.Close()
			if tc.rcv != nil {
				tc.rcv(rcv)
			}
			yml := bytes.ReplaceAll([]byte(benchYAML), []byte("STRATEGY"), []byte("simple_shuffle"))
			if u := tc.url(rcv); u != "" {
				yml = append(yml, []byte("tracing: {otlp_endpoint: \""+u+"\"}\n")...)
			}
			cfg, err := config.Load(yml, nil)
			if err != nil {
				b.Fatal(err)
			}
			n, err := gateway.Assemble(cfg, gateway.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_ = n.Close(ctx)
			}()
			h := n.Handler()
			body := []byte(`{"model":"m","messages":[{"role":"user","content":"hello there, how are you?"}]}`)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				serve(b, h, body)
			}
			b.StopTimer()
			b.ReportMetric(droppedSpans(b, n)/float64(b.N), "dropped/op")
		})
	}
}

// closedPort is an http:// URL on loopback where nothing listens.
func closedPort(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// droppedSpans reads switchyard_tracing_spans_dropped_total off the node's
// /metrics (0 with tracing off).
func droppedSpans(b *testing.B, n *gateway.Node) float64 {
	mfs, err := n.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "switchyard_tracing_spans_dropped_total" {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
