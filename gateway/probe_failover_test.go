package gateway

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"switchyard/config"
)

// stepClock is a routing clock a test moves by hand.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *stepClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestFailedProbeFailsOverAtOnce: SPEC 6, "a failed probe fails over at
// once within the request's budget", whatever routing.retry_after says
// between other attempts. With retry_after longer than the request's
// deadline, the request that carried a failed probe waited for nothing:
// the wait did not fit, the loop ended, and the client got the probe's
// 503 though a healthy deployment stood in the pool.
func TestFailedProbeFailsOverAtOnce(t *testing.T) {
	const yml = `
server: {request_timeout: 2s}
providers:
  - {name: bad, kind: simulated, simulate: {ttfb: 0s, error_rate: 1, error_status: 503}}
  - {name: good, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 4}}
deployments:
  - {id: a, model: m, provider: bad}
  - {id: b, model: m, provider: good}
routing: {retry_after: 10s, failures_before_cooldown: 1, cooldown_base: 10s, probe_interval: 1s}
teams:
  - {name: t, keys: ["sk-test"], models: [m]}
`
	cfg, err := config.Load([]byte(yml), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = ""
	clk := &stepClock{now: time.Unix(1_800_000_000, 0)}
	n, err := Assemble(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	// a's first failure puts it in cooldown (the request it failed in may
	// end there: its wait of 10 s does not fit in 2)
	cooled := false
	for range 20 {
		if w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, body); w.Code != 200 || w.Header().Get("X-Switchyard-Attempts") != "1" {
			cooled = true
			break
		}
	}
	if !cooled {
		t.Fatal("deployment a was never tried")
	}
	// past the probe interval, a's probe fails: b answers at once
	probed := false
	for range 20 {
		clk.Advance(2 * time.Second)
		w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, body)
		if w.Code != 200 {
			t.Fatalf("status %d after a failed probe (attempts %s): %s", w.Code, w.Header().Get("X-Switchyard-Attempts"), w.Body)
		}
		if w.Header().Get("X-Switchyard-Attempts") == "2" {
			probed = true
			break
		}
	}
	if !probed {
		t.Fatal("no request carried a probe of a")
	}
}
