package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchyard/config"
)

func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(good, []byte("providers: [{name: s, kind: simulated}]\ndeployments: [{id: a, model: m, provider: s}]\nteams: [{name: t, keys: [k]}]\n"), 0o644)
	_ = os.WriteFile(bad, []byte("providers: [{name: s, kind: nope}]\nbogus: 1\nrouting: {cooldown_base: -1s}\n"), 0o644)
	if code, out, _ := runCLI(t, "", "check", "-config", good); code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("good config: %d %s", code, out)
	}
	code, _, errs := runCLI(t, "", "check", "-config", bad)
	if code != 1 {
		t.Fatalf("bad config must exit 1, got %d", code)
	}
	for _, want := range []string{"providers[0].kind", "bogus: unknown key", "routing.cooldown_base"} {
		if !strings.Contains(errs, want) {
			t.Errorf("check output lacks %q:\n%s", want, errs)
		}
	}
	if code, _, _ := runCLI(t, "", "check"); code != 2 {
		t.Fatalf("missing -config must be a usage error, got %d", code)
	}
}

func TestClassify(t *testing.T) {
	code, out, errs := runCLI(t, `{"model":"normal","reasoning_effort":"high","messages":[{"role":"user","content":"x"}]}`, "classify")
	if code != 0 || !strings.Contains(out, "tier: hard") {
		t.Fatalf("%d %s %s", code, out, errs)
	}
	code, out, _ = runCLI(t, `{"model":"normal","messages":[{"role":"user","content":"thanks!"}]}`, "classify")
	if code != 0 || !strings.Contains(out, "tier: easy") || !strings.Contains(out, "score: 0") {
		t.Fatalf("%d %s", code, out)
	}
	if code, _, _ := runCLI(t, `{"model":`, "classify"); code != 1 {
		t.Fatalf("malformed request must exit 1, got %d", code)
	}
}

func TestVersionAndUnknown(t *testing.T) {
	if code, out, _ := runCLI(t, "", "version"); code != 0 || !strings.HasPrefix(out, "switchyard ") {
		t.Fatalf("%d %s", code, out)
	}
	if code, _, errs := runCLI(t, "", "frobnicate"); code != 2 || !strings.Contains(errs, "unknown command") {
		t.Fatalf("%d %s", code, errs)
	}
	if code, _, errs := runCLI(t, "", "mockllm", "-error-rate", "2"); code != 2 || !strings.Contains(errs, "error-rate") {
		t.Fatalf("%d %s", code, errs)
	}
}

// The demo serves the console: without SWITCHYARD_ADMIN_KEY it gets a
// random admin key per run, never a fixed one.
func TestDemoAdminKeyRandom(t *testing.T) {
	a, b := demoAdminKey(), demoAdminKey()
	if a == b || len(a) < len("sy-admin-")+32 {
		t.Fatalf("demo admin keys %q %q", a, b)
	}
}

// serveForTest serves the config file at path with listenAndServe (the
// production serve path, reload included) until the test ends, and returns
// a context that ends when the server is asked to stop.
func serveForTest(t *testing.T, path string) context.Context {
	t.Helper()
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan int, 1)
	go func() {
		done <- listenAndServe(ctx, cfg, path, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, func(string) { close(ready) })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("server did not stop")
		}
	})
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("server did not start")
	}
	return ctx
}
