package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchyard/config"
)

// TestServeLogRequestLines: the serving process's log (serveLogger) is
// JSON lines; each request, answered or refused, is one "request" line
// with the id its client got, appended straight to the batching writer
// beside the logger's own lines, and all of them are out once the process
// has stopped.
func TestServeLogRequestLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	_ = os.WriteFile(path, []byte(`server: {listen: "127.0.0.1:0"}
data_dir: ""
providers: [{name: s, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 4}}]
deployments: [{id: a, model: m, provider: s}]
teams: [{name: t, keys: [sk-t]}]
`), 0o644)
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// a plain buffer: the log's LogWriter is its one writer, and it orders
	// its writes (and Close's) under one lock
	var stderr bytes.Buffer
	log, requests, flush := serveLogger(&stderr)
	ctx, cancel := context.WithCancel(context.Background())
	addr, done := make(chan string, 1), make(chan int, 1)
	go func() { done <- listenAndServe(ctx, cfg, path, log, requests, func(a string) { addr <- a }) }()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(10 * time.Second):
		t.Fatal("server did not start")
	}
	ids := map[string]int{}
	for _, key := range []string{"sk-t", "sk-wrong"} {
		req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ids[resp.Header.Get("X-Request-Id")] = resp.StatusCode
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("listenAndServe returned %d", code)
	}
	_ = flush()
	seen := map[string]int{}
	var msgs []string
	for _, l := range strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		msgs = append(msgs, m["msg"].(string))
		if m["msg"] == "request" {
			id := m["request_id"].(string)
			seen[id]++
			if m["status"] != float64(ids[id]) || m["level"] != "INFO" || m["time"] == nil {
				t.Errorf("request line %s, want status %d", l, ids[id])
			}
		}
	}
	for id, status := range ids {
		if seen[id] != 1 {
			t.Errorf("request %s (status %d) logged %d times, want once; messages %v", id, status, seen[id], msgs)
		}
	}
	if !strings.Contains(strings.Join(msgs, ","), "switchyard listening") || msgs[len(msgs)-1] != "stopped" {
		t.Errorf("the logger's own lines are missing or out of order: %v", msgs)
	}
}
