package edge

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/internal/teamtest"
	"switchyard/telemetry"
)

// TestWriterLazy: a request whose Finish only settles its reservation
// (tokens used, more or less than reserved) and leaves an audit entry waits
// for a round at most lazyEvery; a slot release, a pin or an audit queue of
// lazyBatch entries makes the next tick send. Before, every tick with
// anything pending sent a round: one at a time, a round for each request.
func TestWriterLazy(t *testing.T) {
	m := miniredis.RunT(t)
	clk := newFakeClock()
	m.SetTime(clk.Now())
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	r := newRedis(c, nil, Config{Prefix: "sy:", Timeout: time.Second, Clock: clk.Now}, nil, nil, nil, &countObs{})
	w := r.w
	ctx := context.Background()
	// the first round renews and reports; after it only what Finish queues is due
	if !w.step(ctx, clk.Now()) || w.due(clk.Now()) {
		t.Fatal("a writer with nothing pending is due after its first round")
	}

	plain := teamtest.Team("plain", teamtest.Limits{RPM: 1000, TPM: 100000})
	finish := func(team string, b Begun, o *Outcome) {
		t.Helper()
		r.Finish(&b, o)
	}
	b := begin(t, r, plain, 50)
	finish("plain", b, &Outcome{Served: true, Deployment: "d", PromptTokens: 60, CompletionTokens: 10, Audit: &telemetry.Entry{RequestID: "a"}})
	if w.due(clk.Now()) {
		t.Fatal("a settlement and an audit entry are due at once")
	}
	clk.Advance(lazyEvery - time.Millisecond)
	if w.due(clk.Now()) {
		t.Fatal("due before lazyEvery")
	}
	clk.Advance(time.Millisecond)
	if !w.due(clk.Now()) {
		t.Fatal("not due after lazyEvery")
	}
	if !w.step(ctx, clk.Now()) || w.due(clk.Now()) {
		t.Fatal("still due after the round that sent it")
	}
	if tat, _ := m.Get("sy:{team:plain}:tat"); tat == "" {
		t.Fatal("the round did not write the team's TATs")
	}

	// a slot release is prompt
	par := teamtest.Team("par", teamtest.Limits{RPM: 1000, TPM: 100000, Par: 4})
	b = begin(t, r, par, 50)
	finish("par", b, &Outcome{Served: true, Deployment: "d", PromptTokens: 50})
	if !w.due(clk.Now()) {
		t.Fatal("a slot release waits for lazyEvery")
	}
	w.step(ctx, clk.Now())

	// a pin is prompt
	b, err := r.Begin(ctx, &Request{RequestID: "s", Team: plain, Tokens: 50, Pins: PinQuery{Session: "sess", Models: [2]string{"m"}}})
	if err != nil {
		t.Fatal(err)
	}
	finish("plain", b, &Outcome{Served: true, Deployment: "d", PromptTokens: 50, DepModel: "m", DepPin: "d", DepTTL: time.Minute})
	if !w.due(clk.Now()) {
		t.Fatal("a pin waits for lazyEvery")
	}
	w.step(ctx, clk.Now())

	// lazyBatch audit entries are due at once
	w.store = telemetry.NewRedisAudit(c, "sy:", 1000, telemetry.NewRing(10))
	for i := range lazyBatch {
		w.audit(&telemetry.Entry{RequestID: reqID(i)})
		if due := w.due(clk.Now()); due != (i == lazyBatch-1) {
			t.Fatalf("after %d audit entries due is %v", i+1, due)
		}
	}
}

// TestFinishWriteLazy: what another node's next request looks for is not
// lazy; the settlement of a reservation and usage are.
func TestFinishWriteLazy(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    finishWrite
		lazy bool
	}{
		{"refund", finishWrite{delta: -40, usd: -0.01}, true},
		{"charge past the reservation", finishWrite{delta: 40, usd: 0.01, spent: true}, true},
		{"usage only", finishWrite{dep0: "d", tokens: 10}, true},
		{"team slot", finishWrite{slot: "s"}, false},
		{"tier pin", finishWrite{tierKey: "k", tier: "hard"}, false},
		{"deployment pin", finishWrite{depKey: "k", dep: "d"}, false},
		{"cache entry", finishWrite{cacheKey: "k", cacheVal: "v"}, false},
		{"lease end", finishWrite{lease: leaseOp{key: "k"}}, false},
		{"key level slot", finishWrite{nsub: 1, subs: [2]subWrite{{slot: "s"}}}, false},
		{"user level slot", finishWrite{nsub: 2, subs: [2]subWrite{{delta: 3}, {slot: "s"}}}, false},
		{"levels settling", finishWrite{nsub: 2, subs: [2]subWrite{{delta: 3}, {usd: -1}}}, true},
	} {
		if got := tc.w.lazy(); got != tc.lazy {
			t.Errorf("%s: lazy %v, want %v", tc.name, got, tc.lazy)
		}
	}
}
