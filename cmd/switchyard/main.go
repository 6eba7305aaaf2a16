// Command switchyard is the Switchyard LLM gateway (SPEC 13): with no
// arguments it serves the built-in demo; subcommands serve a real config,
// check one, run the simulated upstream, classify a request, and print the
// version.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/gateway"
	"switchyard/node"
	"switchyard/providers"
	"switchyard/redact"
	"switchyard/routing/tier"
	"switchyard/telemetry"
	"switchyard/wire"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return serveDemo(stdout, stderr)
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "check":
		return check(args[1:], stdout, stderr)
	case "mockllm":
		return mockllm(args[1:], stderr)
	case "classify":
		return classify(args[1:], stdin, stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "switchyard", version)
		return 0
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "switchyard: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  switchyard                         serve the built-in demo on :8080 (simulated providers, no Redis)
  switchyard serve -config FILE      serve a configuration
  switchyard check -config FILE      validate a configuration; lists every problem
  switchyard mockllm -listen ADDR [-ttfb D] [-tps N] [-error-rate F] [-error-status N] [-context-tokens N]
                                     serve the simulated upstream over HTTP (OpenAI, Anthropic, Gemini, Vertex and Bedrock formats)
  switchyard classify [-config FILE] < request.json
                                     print the smart-routing score, signals and tier of a request
  switchyard version
`)
}

// newLogger is the process's structured log: JSON lines on w, with
// anything shaped like a credential masked (SPEC 15).
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(redact.Handler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})))
}

// serveLogger is a serving process's log: newLogger's lines batched onto w
// by a telemetry.LogWriter (no write system call per request line); the
// request log that appends each request's line to that writer directly,
// the bytes newLogger's handler would write; and flush, which writes out
// what is batched, on every way out.
func serveLogger(w io.Writer) (log *slog.Logger, requests *telemetry.RequestLog, flush func() error) {
	lw := telemetry.NewLogWriter(w, telemetry.DefaultLogBuffer, telemetry.DefaultLogDelay)
	log = newLogger(lw)
	return log, telemetry.NewRequestLog(log, lw), lw.Close
}

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Demo(os.Environ())
	}
	return config.LoadFile(path)
}

func check(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration file (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" {
		fmt.Fprintln(stderr, "switchyard check: -config FILE is required")
		return 2
	}
	cfg, err := config.LoadFile(*path)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", *path, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok (%d providers, %d deployments, %d teams, %d tier routes)\n",
		*path, len(cfg.Providers), len(cfg.Deployments), len(cfg.Teams), len(cfg.SmartRouting.Routes))
	return 0
}

func serve(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration file (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" {
		fmt.Fprintln(stderr, "switchyard serve: -config FILE is required (run `switchyard` alone for the demo)")
		return 2
	}
	lowerGCForStart(os.Getenv("GOGC")) // until startGCTuner, once the node is assembled
	cfg, err := config.LoadFile(*path)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", *path, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log, requests, flush := serveLogger(stderr)
	defer flush()
	return listenAndServe(ctx, cfg, *path, log, requests, nil)
}

func serveDemo(stdout, stderr io.Writer) int {
	cfg, err := config.Demo(os.Environ())
	if err != nil {
		fmt.Fprintf(stderr, "demo config: %v\n", err)
		return 1
	}
	// The demo includes the console, which needs the admin API: without
	// SWITCHYARD_ADMIN_KEY it gets a fresh random admin key per start
	// (never a well-known one: the demo listens on every interface).
	adminKey := ""
	if cfg.Admin.Key == "" {
		adminKey = demoAdminKey()
		cfg.Admin.Key = adminKey
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log, requests, flush := serveLogger(stderr)
	defer flush()
	return listenAndServe(ctx, cfg, "", log, requests, func(addr string) {
		host := addr
		if h, p, err := net.SplitHostPort(addr); err == nil && (h == "" || h == "::" || h == "0.0.0.0") {
			host = "localhost:" + p
		}
		fmt.Fprintf(stdout, `
Switchyard demo is listening on %s (simulated providers, local-only state).
Demo team key: %s

Try:
  curl -s http://%[3]s/v1/chat/completions -H "Authorization: Bearer %[2]s" -H "Content-Type: application/json" \
    -d '{"model":"normal","messages":[{"role":"user","content":"Hello!"}]}' -i

  curl -sN http://%[3]s/v1/chat/completions -H "Authorization: Bearer %[2]s" -H "Content-Type: application/json" \
    -d '{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Stream me a story"}]}'

  curl -s http://%[3]s/v1/chat/completions -H "Authorization: Bearer %[2]s" -H "Content-Type: application/json" \
    -d '{"model":"normal","reasoning_effort":"high","messages":[{"role":"user","content":"Prove that there are infinitely many primes."}]}' -i

  # the response cache is on for claude-sonnet: run it twice, a miss then a hit (X-Switchyard-Cache, Age)
  curl -s http://%[3]s/v1/chat/completions -H "Authorization: Bearer %[2]s" -H "Content-Type: application/json" \
    -d '{"model":"claude-sonnet","messages":[{"role":"user","content":"What is a response cache?"}]}' -D - -o /dev/null | grep -i -e x-switchyard-cache -e '^age'

  curl -s http://%[3]s/v1/embeddings -H "Authorization: Bearer %[2]s" -H "Content-Type: application/json" \
    -d '{"model":"text-embedding-3-small","input":"hello"}'

  curl -s http://%[3]s/v1/models -H "Authorization: Bearer %[2]s"
  curl -s http://%[3]s/metrics | grep switchyard_requests_total

`, addr, config.DemoKey, host)
		if adminKey != "" {
			fmt.Fprintf(stdout, "Operator console: http://%s/ui/  (admin key for this run: %s)\n\n", host, adminKey)
		} else {
			fmt.Fprintf(stdout, "Operator console: http://%s/ui/  (sign in with SWITCHYARD_ADMIN_KEY)\n\n", host)
		}
	})
}

// demoAdminKey is a random admin key for one demo run.
func demoAdminKey() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return "sy-admin-" + hex.EncodeToString(b)
}

// listenAndServe serves cfg until ctx ends, then drains. path is the file
// SIGHUP re-reads ("" for the demo: a SIGHUP then logs that there is
// nothing to reload). requests writes the request lines (nil: through log).
func listenAndServe(ctx context.Context, cfg *config.Config, path string, log *slog.Logger, requests *telemetry.RequestLog, ready func(addr string)) int {
	ctx, cancel := context.WithCancel(ctx) // the tuners and the SIGHUP loop end with the process's serving, on every way out
	defer cancel()
	applyMemoryLimit(cfg.Server, os.Getenv("GOMEMLIMIT"), "/sys/fs/cgroup", log)
	n, err := node.Assemble(cfg, node.Options{Logger: log, RequestLog: requests, ConfigPath: path, Version: version})
	if err != nil {
		log.Error("starting gateway", "error", err)
		return 1
	}
	// Reading a large file (100,000 keys) builds a transient tree several
	// times the size of what the node keeps; give it back to the system
	// now, not minutes later through the background scavenger (SPEC 16:
	// node memory is measured as RSS).
	debug.FreeOSMemory()
	startGCTuner(ctx, cfg.Server, os.Getenv("GOGC"), log) // after the start's transient heap is gone
	startProcs(ctx, cfg.Server, os.Getenv("GOMAXPROCS"), log)
	return serveNode(ctx, cfg, n, net.Listen, stopBounds{drain: drainTimeout, flush: flushTimeout}, log, ready)
}

// serveNode serves an assembled node on server.listen (and
// server.metrics_listen) until ctx ends or a server fails, and returns the
// exit code. Every way out closes the node within b.flush (after the drain
// of b.drain when it served): the heartbeat is left and the pending usage,
// spend and audit entries are sent (SPEC 9, 12), whether a listen failed,
// a server failed at runtime or the process was told to stop.
func serveNode(ctx context.Context, cfg *config.Config, n *node.Node, listen func(network, addr string) (net.Listener, error), b stopBounds, log *slog.Logger, ready func(addr string)) int {
	ln, err := listen("tcp", cfg.Server.Listen)
	if err != nil {
		log.Error("listening", "addr", cfg.Server.Listen, "error", err)
		closeNode(n.Close, b.flush, log)
		return 1
	}
	msrv := n.MetricsServer()
	var mln net.Listener
	if msrv != nil {
		if mln, err = listen("tcp", cfg.Server.MetricsListen); err != nil {
			log.Error("listening for metrics", "addr", cfg.Server.MetricsListen, "error", err)
			_ = ln.Close()
			closeNode(n.Close, b.flush, log)
			return 1
		}
	}
	srv := newServer(n.HTTPServer())
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go reloadOnHUP(ctx, hup, n.Reloader, log)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if msrv != nil {
		go func() { errc <- msrv.Serve(mln) }()
		defer func() { _ = msrv.Close() }()
		log.Info("metrics listening", "addr", mln.Addr().String())
	}
	log.Info("switchyard listening", "addr", ln.Addr().String(), "node", cfg.Server.NodeID, "version", version,
		"redis", cfg.Redis.Enabled(), "deployments", len(n.Catalog.Load().Deployments))
	if ready != nil {
		ready(ln.Addr().String())
	}
	code := 0
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			// the requests in flight on the main listener still end
			// (drained) and their usage is flushed; the exit code says
			// the process failed
			log.Error("server failed: stopping", "error", err)
			code = 1
		}
	case <-ctx.Done():
		log.Info("shutting down: draining requests")
	}
	return max(code, gracefulStop(srv, n.Close, b, log))
}

// A graceful stop (SIGINT, SIGTERM) drains for at most drainTimeout, then
// flushes for at most flushTimeout: 40s in all, under the 45s
// terminationGracePeriodSeconds of deploy/k8s/deployment.yaml.
const (
	drainTimeout = 30 * time.Second
	flushTimeout = 10 * time.Second
)

// stopBounds bound the two steps of a graceful stop.
type stopBounds struct {
	drain time.Duration // requests in flight may finish for this long
	// then the handlers that the drain left running may return, for half
	// of this at most, and the node's pending writes are sent, until all
	// of it has passed
	flush time.Duration
}

// drainer is what gracefulStop needs of the HTTP server.
type drainer interface {
	Shutdown(ctx context.Context) error
	Close() error
	// Wait returns once every handler has returned (0), or when ctx ends
	// with the number still running.
	Wait(ctx context.Context) int
}

// gracefulStop drains srv, then flushes the node (flush: Node.Close) and
// returns the process's exit code: 1 when the flush failed. The flush has
// a deadline of its own: a drain that used all its time (a stream longer
// than it) must not leave the pending usage, spend and audit entries an
// expired context, which sends nothing. Connections still open after the
// drain are closed first, and the flush waits for their handlers to
// return, so that their requests' usage is queued before it (Close does
// not wait for them); a handler that does not return within half of
// b.flush is left behind, so the flush keeps at least the other half.
func gracefulStop(srv drainer, flush func(context.Context) error, b stopBounds, log *slog.Logger) int {
	drainCtx, cancel := context.WithTimeout(context.Background(), b.drain)
	err := srv.Shutdown(drainCtx)
	cancel()
	flushCtx, cancel := context.WithTimeout(context.Background(), b.flush)
	defer cancel()
	if err != nil {
		log.Warn("drain did not finish in time: closing the connections still open", "drain", b.drain.String(), "error", err)
		_ = srv.Close()
		waitCtx, cancelWait := context.WithTimeout(flushCtx, b.flush/2)
		if running := srv.Wait(waitCtx); running > 0 {
			log.Error("handlers still running after their connections were closed: flushing without their usage",
				"handlers", running, "waited", (b.flush / 2).String())
		}
		cancelWait()
	}
	if err := flush(flushCtx); err != nil {
		log.Error("flushing on shutdown", "error", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

// closeNode closes a node that serves nothing (a listen failed) within
// bound: its heartbeat is left and its pending writes are sent.
func closeNode(flush func(context.Context) error, bound time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := flush(ctx); err != nil {
		log.Error("flushing on shutdown", "error", err)
	}
}

// server is the node's http.Server with its running handlers counted:
// Close ends every connection but returns without waiting for the handlers
// on them, whose Finish queues the usage, spend and audit entries that the
// stop then flushes (SPEC 12).
type server struct {
	*http.Server

	running atomic.Int64  // handlers running
	waiting atomic.Bool   // a Wait is pending: the handler that brings running to 0 signals idle
	idle    chan struct{} // buffered 1: a handler ended with none running
}

// newServer counts the handlers of s (its Handler is wrapped).
func newServer(s *http.Server) *server {
	srv := &server{Server: s, idle: make(chan struct{}, 1)}
	h := s.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	s.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.running.Add(1)
		defer srv.done()
		h.ServeHTTP(w, r)
	})
	return srv
}

func (s *server) done() {
	if s.running.Add(-1) == 0 && s.waiting.Load() {
		select {
		case s.idle <- struct{}{}:
		default: // a signal is pending already
		}
	}
}

// Wait implements drainer.
func (s *server) Wait(ctx context.Context) int {
	s.waiting.Store(true)
	defer s.waiting.Store(false)
	for {
		n := s.running.Load()
		if n == 0 {
			return 0
		}
		select {
		case <-s.idle: // recheck: a handler may have started since
		case <-ctx.Done():
			return int(s.running.Load())
		}
	}
}

// reloadOnHUP re-reads the config file on every SIGHUP (SPEC 11). A bad
// file is logged problem by problem by the reloader and changes nothing.
func reloadOnHUP(ctx context.Context, hup <-chan os.Signal, r *gateway.Reloader, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			if _, err := r.Reload(rctx); err != nil {
				log.Error("SIGHUP: reload not applied", "error", err)
			}
			cancel()
		}
	}
}

func mockllm(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("mockllm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9000", "address to listen on")
	seed := fs.Int64("seed", 1, "random seed for simulated errors")
	profile := providers.MockFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := newLogger(stderr)
	p, err := profile()
	if err != nil {
		fmt.Fprintln(stderr, "switchyard mockllm:", err)
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Error("listening", "addr", *listen, "error", err)
		return 1
	}
	log.Info("mockllm listening", "addr", ln.Addr().String(), "ttfb", p.TTFB.String(), "tps", p.TokensPerSecond,
		"error_rate", p.ErrorRate, "error_status", p.ErrorStatus, "context_tokens", p.ContextTokens)
	srv := &http.Server{Handler: providers.MockHandler(p, *seed), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("mockllm failed", "error", err)
		return 1
	}
	return 0
}

func classify(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("classify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration file (default: the built-in demo's smart_routing)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	body, err := io.ReadAll(io.LimitReader(stdin, cfg.Server.MaxBodyBytes+1))
	if err != nil {
		fmt.Fprintln(stderr, "reading request:", err)
		return 1
	}
	format := wire.FormatOpenAI
	if looksAnthropic(body) {
		format = wire.FormatAnthropic
	}
	req, err := wire.Parse(body, catalog.OpChat, format)
	if err != nil {
		fmt.Fprintln(stderr, "request:", err)
		return 1
	}
	c := tier.New(cfg.SmartRouting)
	v := c.Classify(req)
	fmt.Fprintf(stdout, "tier: %s\nscore: %d (threshold %d)\nsource: %s\nsignals:\n", v.Tier, v.Score, c.Threshold(), v.Source)
	if len(v.Signals) == 0 {
		fmt.Fprintln(stdout, "  (none)")
	}
	for _, s := range v.Signals {
		fmt.Fprintf(stdout, "  %-18s +%d  %s\n", s.Name, s.Points, s.Detail)
	}
	return 0
}

// looksAnthropic guesses the body's format: Anthropic bodies carry a
// top-level system or an Anthropic thinking block.
func looksAnthropic(body []byte) bool {
	_, _, sys := wire.FindTopLevel(body, "system")
	_, _, th := wire.FindTopLevel(body, "thinking")
	return sys || th
}
