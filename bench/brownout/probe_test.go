package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"switchyard/config"
	"switchyard/gateway"
	"switchyard/internal/fakeclock"
)

// The probe's cost seen from outside, on the assembled gateway with a fake
// routing clock: during an outage of one deployment with healthy peers, a
// probe rides on a live request, fails over at once (two attempts, served),
// is marked in that request's attempt timeline and counted as a failure in
// switchyard_routing_probes_total; once the deployment is back, the next
// due probe succeeds and ends its cooldown.
func TestProbeVisibleInTimelineAndMetrics(t *testing.T) {
	yaml := strings.NewReplacer("STRATEGY", "round_robin", "OBJECTIVE", "balanced", "ttfb: 20ms", "ttfb: 0s").Replace(recoveryYAML)
	cfg, err := config.Load([]byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	node, err := gateway.Assemble(cfg, gateway.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clock, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close(context.Background()) })
	c := &cluster{nodes: []*gateway.Node{node}, hs: []http.Handler{node.Handler()}}
	seq := 0
	send := func() (served, attempts, id string) {
		t.Helper()
		seq++
		id = fmt.Sprintf("req-%d", seq)
		body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"hello %d"}]}`, seq)
		req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer sk-bench")
		req.Header.Set("X-Request-Id", id)
		w := httptest.NewRecorder()
		node.Handler().ServeHTTP(w, req)
		if w.Code != 200 {
			t.Fatalf("request %d: %d %s", seq, w.Code, w.Body)
		}
		return w.Header().Get("X-Switchyard-Deployment"), w.Header().Get("X-Switchyard-Attempts"), id
	}
	probes := func() map[string]float64 { return c.counter("switchyard_routing_probes_total", "outcome") }

	if err := c.tune("p3", func(p *config.Simulate) { p.ErrorRate, p.ErrorStatus = 1, 503 }); err != nil {
		t.Fatal(err)
	}
	for range 30 { // until three failures in a row cool sick down, each failed over
		if c.counter("switchyard_routing_cooldowns_total", "")[""] > 0 {
			break
		}
		send()
	}
	if n := c.counter("switchyard_routing_cooldowns_total", "")[""]; n != 1 {
		t.Fatalf("%v cooldowns started, want 1", n)
	}
	// Cooling for 5s; the first probe is due a fifth of it in.
	for range 6 {
		if served, _, _ := send(); served == "sick" {
			t.Fatal("sick served while cooling and before its probe")
		}
	}
	if n := probes()["failure"]; n != 0 {
		t.Fatalf("%v probes before one was due", n)
	}
	clock.Advance(time.Second)
	served, attempts, id := send()
	if served == "sick" || attempts != "2" {
		t.Fatalf("the failed probe's request: served by %s in %s attempts, want a healthy peer in 2", served, attempts)
	}
	es, _ := node.Audit.Lookup(context.Background(), id)
	if len(es) != 1 || len(es[0].Attempts) != 2 || !es[0].Attempts[0].Probe || es[0].Attempts[0].Deployment != "sick" || es[0].Attempts[1].Probe {
		t.Fatalf("timeline of the probe's request: %+v", es)
	}
	if n := probes()["failure"]; n != 1 {
		t.Fatalf("probes failure=%v, want 1", n)
	}
	for range 6 { // one probe per interval: none until the next is due
		if _, attempts, _ := send(); attempts != "1" {
			t.Fatal("a second probe within the interval")
		}
	}

	if err := c.tune("p3", func(p *config.Simulate) { p.ErrorRate = 0 }); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second) // the failed probe re-armed 10s: probes every 2s
	if served, attempts, _ := send(); served != "sick" || attempts != "1" {
		t.Fatalf("the next probe: served by %s in %s attempts, want sick at once", served, attempts)
	}
	if n := probes()["success"]; n != 1 {
		t.Fatalf("probes success=%v, want 1", n)
	}
	got := map[string]int{}
	for range 30 {
		s, _, _ := send()
		got[s]++
	}
	if got["sick"] != 10 {
		t.Fatalf("after the successful probe sick served %d of 30 round-robin requests, want 10", got["sick"])
	}
}
