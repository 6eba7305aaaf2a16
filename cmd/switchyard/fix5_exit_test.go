package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"switchyard/config"
)

// exitYAML is a Redis node (so that closing it is visible: the heartbeat
// leaves, the connections close); ${ADDR}, ${METRICS} and ${REDIS} are set.
const exitYAML = `
server: {listen: "${ADDR}", metrics_listen: "${METRICS}", node_id: exit-1}
redis: {url: "${REDIS}", timeout: 2s}
data_dir: ""
providers: [{name: sim, kind: simulated}]
deployments: [{id: d, model: m, provider: sim}]
teams: [{name: t, keys: [sk-t], models: ["*"]}]
`

// exitConfig loads exitYAML for a node on the Redis m.
func exitConfig(t *testing.T, m *miniredis.Miniredis, addr, metrics string) *config.Config {
	t.Helper()
	yml := strings.NewReplacer("${ADDR}", addr, "${METRICS}", metrics, "${REDIS}", "redis://"+m.Addr()+"/0").Replace(exitYAML)
	cfg, err := config.Load([]byte(yml), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// assertNodeClosed fails unless the node on m was closed: every Redis
// connection of it ends (bounded wait), and its heartbeat left the live set
// (a node not closed keeps announcing itself, and its pending usage, spend
// and audit entries are never sent).
func assertNodeClosed(t *testing.T, m *miniredis.Miniredis) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for m.CurrentConnectionCount() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d Redis connections still open 5s after the process returned: the node was not closed", m.CurrentConnectionCount())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if members, _ := m.ZMembers("switchyard:{nodes}:seen"); len(members) != 0 {
		t.Fatalf("the node is still in the live set after the process returned: %v", members)
	}
}

// TestListenFailureClosesTheNode: a listen that fails after the node is
// assembled (the main address or the metrics one is taken) exits 1 and
// closes the node on the way out.
func TestListenFailureClosesTheNode(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name          string
		addr, metrics func() string
	}{
		{"server.listen taken", busy.Addr().String, func() string { return "" }},
		{"server.metrics_listen taken", func() string { return freeAddr(t) }, busy.Addr().String},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := miniredis.RunT(t)
			cfg := exitConfig(t, m, tc.addr(), tc.metrics())
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if code := listenAndServe(ctx, cfg, "", slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil); code != 1 {
				t.Fatalf("exit code %d, want 1", code)
			}
			assertNodeClosed(t, m)
		})
	}
}
