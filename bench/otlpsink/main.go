// Command otlpsink is the stand-in OTLP/HTTP collector of bench/overhead.sh
// -t: it accepts every POST /v1/traces, reads and discards the body, and
// answers with an empty export response, so the benchmark measures the
// gateway's side of tracing and not a collector's. On SIGINT/SIGTERM it
// prints how many export requests and bytes it took.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:4318", "address to listen on")
	flag.Parse()
	var exports, bytes atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, 64<<20))
		exports.Add(1)
		bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
	})
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		<-ch
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "otlpsink:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "otlpsink: %d exports, %d bytes\n", exports.Load(), bytes.Load())
}
