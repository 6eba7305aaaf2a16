package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/config"
)

func TestNewClientTopologies(t *testing.T) {
	if _, _, err := NewClient(config.Redis{}); !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("empty config: err = %v, want ErrNotConfigured", err)
	}
	if _, _, err := NewClient(config.Redis{URL: "http://nope"}); err == nil {
		t.Fatal("bad URL accepted")
	}
	for _, tc := range []struct {
		name string
		cfg  config.Redis
		want string
	}{
		{"url", config.Redis{URL: "redis://:pw@127.0.0.1:1/2"}, "*redis.Client"},
		{"one addr", config.Redis{Addrs: []string{"127.0.0.1:1"}}, "*redis.Client"},
		{"cluster", config.Redis{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}}, "*redis.ClusterClient"},
		{"sentinel", config.Redis{Addrs: []string{"127.0.0.1:1"}, MasterName: "m"}, "*redis.Client"},
	} {
		c, br, err := NewClient(tc.cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if br == nil || !br.Up() {
			t.Fatalf("%s: no breaker, or not up", tc.name)
		}
		got := "?"
		switch c.(type) {
		case *redis.Client:
			got = "*redis.Client"
		case *redis.ClusterClient:
			got = "*redis.ClusterClient"
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
		_ = c.Close()
	}
}

// refusedAddr returns a loopback address nobody listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// hungAddr returns the address of a server that accepts connections and
// never answers: a hung or partitioned Redis.
func hungAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // hold it open, read nothing
		}
	}()
	return ln.Addr().String()
}

// TestBoundedWhenDown: a refused port and a hung server each answer within a
// small multiple of redis.timeout even with no caller deadline (go-redis's
// defaults took 1.7 s and 5 s here), and once the breaker opens a call costs
// no network time at all.
func TestBoundedWhenDown(t *testing.T) {
	const timeout = 50 * time.Millisecond
	for _, tc := range []struct {
		name string
		addr string
	}{
		{"refused", refusedAddr(t)},
		{"hung", hungAddr(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock() // frozen: the breaker never half-opens during the test
			br := NewBreaker(3, time.Second, clk.Now)
			c, err := NewClientWithBreaker(config.Redis{URL: "redis://" + tc.addr, Timeout: timeout}, br)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for i := range 3 {
				start := time.Now()
				err := c.Ping(context.Background()).Err()
				if took := time.Since(start); took > 10*timeout { // bounded (the defaults took 1.7-5 s), with room for a loaded CI machine
					t.Fatalf("call %d took %v with timeout %v (err %v)", i, took, timeout, err)
				}
				if err == nil {
					t.Fatalf("call %d succeeded against a dead server", i)
				}
			}
			if br.Up() {
				t.Fatal("breaker still up after 3 failed calls")
			}
			start := time.Now()
			for range 1000 {
				if err := c.Ping(context.Background()).Err(); !errors.Is(err, ErrBreakerOpen) {
					t.Fatalf("open breaker: err = %v, want ErrBreakerOpen", err)
				}
			}
			// No call touches the network: on average far below the timeout
			// (a loose bound, so a loaded machine under -race does not flake).
			if avg := time.Since(start) / 1000; avg > timeout/10 {
				t.Fatalf("calls with the breaker open took %v each", avg)
			}
		})
	}
}

// TestBreakerRecovers: Redis goes away, the breaker opens; Redis returns on
// the same address, the cool period passes, one probe closes the breaker.
func TestBreakerRecovers(t *testing.T) {
	m := miniredis.RunT(t)
	clk := newFakeClock()
	br := NewBreaker(3, time.Second, clk.Now)
	var changes changeLog
	br.OnChange(changes.add)
	c, err := NewClientWithBreaker(config.Redis{URL: "redis://" + m.Addr(), Timeout: 50 * time.Millisecond}, br)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, "absent").Err(); !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	m.Close()
	for range 3 {
		_ = c.Get(ctx, "k").Err()
	}
	if br.Up() {
		t.Fatal("breaker up with Redis gone")
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("before the cool period: %v, want ErrBreakerOpen", err)
	}
	clk.Advance(time.Second)
	// This call starts the background PING probe and fails at once.
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("call that starts the probe: %v, want ErrBreakerOpen", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for !br.Up() {
		if wctx.Err() != nil {
			t.Fatal("breaker did not close after Redis came back")
		}
		runtime.Gosched()
	}
	if err := c.Get(ctx, "k").Err(); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("after recovery: %v", err)
	}
	if got := changes.String(); got != "[false true]" {
		t.Fatalf("OnChange = %v, want [false true]", got)
	}
}

// TestSentinelHook: the Sentinel client has no Limiter option; the breaker
// is applied as a hook and still fails calls at once when open.
func TestSentinelHook(t *testing.T) {
	clk := newFakeClock()
	br := NewBreaker(1, time.Second, clk.Now)
	_ = br.Allow()
	br.ReportResult(errDown) // open
	c, err := NewClientWithBreaker(config.Redis{Addrs: []string{refusedAddr(t)}, MasterName: "m", Timeout: 50 * time.Millisecond}, br)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("err = %v, want ErrBreakerOpen", err)
	}
	_, err = c.Pipelined(context.Background(), func(p redis.Pipeliner) error {
		p.Get(context.Background(), "a")
		return nil
	})
	if !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("pipeline err = %v, want ErrBreakerOpen", err)
	}
}

// TestConnBuffersSmallValuesLarge: pooled connections get connBuffer
// buffers, not go-redis's 32 KiB, and a value, an argument and an error
// line far longer than the buffer still pass whole (a cached entry of
// 1 MiB, a script's long error).
func TestConnBuffersSmallValuesLarge(t *testing.T) {
	m := miniredis.RunT(t)
	c, _, err := NewClient(config.Redis{URL: "redis://" + m.Addr(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := c.(*redis.Client).Options()
	if o.ReadBufferSize != connBuffer || o.WriteBufferSize != connBuffer {
		t.Fatalf("buffers %d/%d, want %d", o.ReadBufferSize, o.WriteBufferSize, connBuffer)
	}
	ctx := context.Background()
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte('a' + i%26)
	}
	if err := c.Set(ctx, "big", big, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, "big").Bytes()
	if err != nil || string(got) != string(big) {
		t.Fatalf("1 MiB value: %d bytes, err %v", len(got), err)
	}
	long := string(big[:3*connBuffer])
	err = c.Eval(ctx, "return redis.error_reply(ARGV[1])", nil, long).Err()
	if err == nil || len(err.Error()) < len(long) {
		t.Fatalf("long error line cut: %d bytes, err %v", len(fmt.Sprint(err)), err)
	}
}
