package config

import (
	"strings"
	"testing"
)

func TestParseProcs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		mode string
		n    int
		bad  bool
	}{
		{in: "adaptive", mode: ProcsAdaptive},
		{in: " auto ", mode: ProcsAuto},
		{in: "1", n: 1},
		{in: "16", n: 16},
		{in: "0", bad: true},
		{in: "-2", bad: true},
		{in: "many", bad: true},
		{in: "", bad: true},
	} {
		mode, n, err := ParseProcs(tc.in)
		if (err != nil) != tc.bad || mode != tc.mode || n != tc.n {
			t.Errorf("%q: %q %d %v, want %q %d (error: %v)", tc.in, mode, n, err, tc.mode, tc.n, tc.bad)
		}
	}
}

// TestProcsConfig: the default is adaptive; a number written as YAML's
// integer is read; a bad value is a problem naming the field and what it
// takes.
func TestProcsConfig(t *testing.T) {
	cfg, err := Load([]byte("providers: []\n"), nil)
	if err != nil || cfg.Server.Procs != ProcsAdaptive {
		t.Fatalf("default: %v %q", err, cfg.Server.Procs)
	}
	cfg, err = Load([]byte("server: {procs: 2}\nproviders: []\n"), nil)
	if err != nil || cfg.Server.Procs != "2" {
		t.Fatalf("procs: 2: %v %+v", err, cfg)
	}
	_, err = Load([]byte("server: {procs: lots}\nproviders: []\n"), nil)
	if err == nil || !strings.Contains(err.Error(), `server.procs: want "adaptive" (the default), "auto" (the Go runtime's own choice) or a number of CPUs of at least 1, got "lots"`) {
		t.Fatalf("%v", err)
	}
}
