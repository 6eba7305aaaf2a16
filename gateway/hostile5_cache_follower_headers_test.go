package gateway

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A streaming coalesced follower is a live stream, fanned out event by
// event while the leader runs (SPEC 18): like the leader's own live relay
// it tells a buffering reverse proxy in front of the gateway not to hold
// its events (X-Accel-Buffering: no), and like every routed answer it
// carries X-Switchyard-Overhead-Ms (SPEC 12.3). The follower had neither.
func TestHostile5StreamFollowerLiveHeaders(t *testing.T) {
	var calls atomic.Int64
	up, release := heldStream(t, &calls)
	defer up.Close()
	n := cacheNode(t, up.URL, "", `  - {name: a, keys: ["sk-a"], models: ["*"]}`)
	gw := httptest.NewServer(n.Handler())
	defer gw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func() (*http.Response, *bufio.Reader) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "POST", gw.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"live headers"}]}`))
		req.Header.Set("Authorization", "Bearer sk-a")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended before its first event: %v", err)
			}
			if strings.Contains(line, "first ") {
				return resp, br
			}
		}
	}
	leader, lb := open()
	follower, fb := open()
	close(release)
	for _, r := range []struct {
		resp *http.Response
		br   *bufio.Reader
	}{{leader, lb}, {follower, fb}} {
		_, _ = io.Copy(io.Discard, r.br)
		r.resp.Body.Close()
	}
	if follower.Header.Get("X-Switchyard-Cache") != "coalesced" || calls.Load() != 1 {
		t.Fatalf("not coalesced: %v calls=%d", follower.Header, calls.Load())
	}
	for _, h := range []string{"X-Accel-Buffering", "X-Switchyard-Overhead-Ms"} {
		if leader.Header.Get(h) == "" {
			t.Fatalf("the leader has no %s: %v", h, leader.Header)
		}
		if follower.Header.Get(h) == "" {
			t.Errorf("the streaming follower has no %s (the leader: %q)", h, leader.Header.Get(h))
		}
	}
	if v := follower.Header.Get("X-Accel-Buffering"); v != "" && v != "no" {
		t.Errorf("X-Accel-Buffering %q", v)
	}
}
