//go:build pprof

package main

// Built with -tags pprof, the binary serves net/http/pprof on the loopback
// address in $PPROF_ADDR (for example 127.0.0.1:6060), for the profiles
// and traces bench/overhead.sh's figures are explained with. Never in a
// release build: the default build has no such listener.

import (
	"log/slog"
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	addr := os.Getenv("PPROF_ADDR")
	if addr == "" {
		return
	}
	go func() {
		if err := http.ListenAndServe(addr, nil); err != nil {
			slog.Error("pprof listener", "addr", addr, "error", err)
		}
	}()
}
