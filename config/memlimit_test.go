package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{"auto", 0, ""}, {"off", 0, ""}, {"", 0, ""},
		{"512MiB", 512 << 20, ""}, {"1GiB", 1 << 30, ""}, {"200MB", 200e6, ""}, {"134217728", 128 << 20, ""},
		{" 64 MiB ", 64 << 20, ""},
		{"lots", 0, "not auto, off or a positive size"}, {"-5MiB", 0, "not auto"}, {"1TiB", 0, "not auto"},
		{"1MiB", 0, "below 16MiB"}, {"9999999999999GiB", 0, "not auto"},
	} {
		got, err := ParseMemoryLimit(tc.in)
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: %d, %v; want %d, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestMemoryLimitAuto: "auto" takes 90% of the cgroup's limit (v2 or v1),
// nothing without one; a size is taken as given; "off" is none.
func TestMemoryLimitAuto(t *testing.T) {
	write := func(root, name, v string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v2, v2max, v1, v1none, empty := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	write(v2, "memory.max", "1000000000\n")
	write(v2max, "memory.max", "max\n")
	write(v1, "memory/memory.limit_in_bytes", "2000000000\n")
	write(v1none, "memory/memory.limit_in_bytes", "9223372036854771712\n")
	for _, tc := range []struct {
		spec, root string
		want       int64
		from       string
	}{
		{"auto", v2, 900000000, "cgroup"}, {"auto", v2max, 0, ""}, {"auto", v1, 1800000000, "cgroup"},
		{"auto", v1none, 0, ""}, {"auto", empty, 0, ""}, {"", v2, 900000000, "cgroup"},
		{"off", v2, 0, ""}, {"256MiB", v2, 256 << 20, "config"},
	} {
		got, from := Server{MemoryLimitSpec: tc.spec}.MemoryLimit(tc.root)
		if got != tc.want || from != tc.from {
			t.Errorf("%q at %s: %d from %q, want %d from %q", tc.spec, tc.root, got, from, tc.want, tc.from)
		}
	}
}

func TestMemoryLimitConfigProblem(t *testing.T) {
	_, err := Load([]byte("server: {memory_limit: lots, gc_percent: 5}\nproviders: []\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "server.memory_limit: \"lots\" is not auto, off or a positive size such as 512MiB") ||
		!strings.Contains(err.Error(), "server.gc_percent: must be between 20 and 1000 (default 100, Go's own; 70 trades throughput for memory), got 5") {
		t.Fatalf("%v", err)
	}
	cfg, err := Load([]byte("providers: []\n"), nil)
	if err != nil || cfg.Server.GCPercent != DefaultGCPercent || cfg.Server.MemoryLimitSpec != MemoryLimitAuto {
		t.Fatalf("defaults: %v %+v", err, cfg)
	}
}
