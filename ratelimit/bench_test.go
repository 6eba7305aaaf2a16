package ratelimit

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/cluster"
	"switchyard/config"
)

// benchTeam exercises every dimension of the script and is never rejected.
var benchTeam = newTeam("bench", limitsOf{rpm: 1e9, tpm: 1e12, par: 1e6, usd: 1e9, period: time.Hour})

func benchAdmit(b *testing.B, l Limiter, parallel bool) {
	b.Helper()
	ctx := context.Background()
	var rejected atomic.Int64
	one := func(i int) {
		d, err := l.Admit(ctx, Admission{RequestID: "bench", Team: benchTeam, Tokens: 500})
		if err != nil {
			b.Fatal(err)
		}
		if !d.Allowed {
			rejected.Add(1)
		}
		l.Release(d.Ticket)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if parallel {
		b.SetParallelism(32) // 64 goroutines on 2 CPUs, like the gateway under load
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				one(0)
			}
		})
	} else {
		for i := 0; b.Loop(); i++ {
			one(i)
		}
	}
	b.StopTimer()
	if n := rejected.Load(); n > 0 {
		b.Fatalf("%d rejected", n)
	}
}

func benchRedis(b *testing.B, addr string) (*Redis, *countObs) {
	b.Helper()
	c, br, err := cluster.NewClient(config.Redis{URL: "redis://" + addr, Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	obs := &countObs{}
	r := NewRedis(c, br, "bench:", time.Second, NewLocal(time.Now, 1), obs)
	b.Cleanup(func() { _ = r.Close(context.Background()) })
	return r, obs
}

// BenchmarkAdmit measures one admission (and its release) per op: the
// node-local GCRA, a team without limits, the script on miniredis, and the
// script on a real redis-server (one EVALSHA round trip).
func BenchmarkAdmit(b *testing.B) {
	b.Run("local", func(b *testing.B) { benchAdmit(b, NewLocal(time.Now, 1), false) })
	b.Run("local-parallel", func(b *testing.B) { benchAdmit(b, NewLocal(time.Now, 1), true) })
	b.Run("unlimited", func(b *testing.B) {
		r := NewRedis(nil, nil, "x:", time.Second, nil, nil)
		defer r.Close(context.Background())
		ctx := context.Background()
		team := newTeam("free", limitsOf{})
		b.ReportAllocs()
		for b.Loop() {
			d, _ := r.Admit(ctx, Admission{RequestID: "r", Team: team})
			r.Release(d.Ticket)
		}
	})
	b.Run("miniredis", func(b *testing.B) {
		m := miniredis.RunT(b)
		r, obs := benchRedis(b, m.Addr())
		benchAdmit(b, r, false)
		if obs.fallbacks.Load() > 0 {
			b.Fatalf("%d fallbacks", obs.fallbacks.Load())
		}
	})
	// The typical team (rpm + tpm, no max_parallel): no release to write.
	b.Run("redis-server-rpm+tpm-parallel", func(b *testing.B) {
		srv := startRedisServer(b)
		r, obs := benchRedis(b, srv.Addr())
		team := newTeam("rt", limitsOf{rpm: 1e9, tpm: 1e12})
		ctx := context.Background()
		b.ReportAllocs()
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if d, _ := r.Admit(ctx, Admission{RequestID: "r", Team: team, Tokens: 500}); !d.Allowed {
					b.Error("rejected")
				}
			}
		})
		if obs.fallbacks.Load() > 0 {
			b.Fatalf("%d fallbacks", obs.fallbacks.Load())
		}
	})
	for _, parallel := range []bool{false, true} {
		name := "redis-server"
		if parallel {
			name += "-parallel"
		}
		b.Run(name, func(b *testing.B) {
			srv := startRedisServer(b)
			r, obs := benchRedis(b, srv.Addr())
			benchAdmit(b, r, parallel)
			if obs.fallbacks.Load() > 0 {
				b.Fatalf("%d fallbacks", obs.fallbacks.Load())
			}
		})
	}
}

// BenchmarkEvalShaFloor is the floor the admission is compared with: a
// bare EVALSHA of a script that returns at once, on the same redis-server
// and client settings.
func BenchmarkEvalShaFloor(b *testing.B) {
	srv := startRedisServer(b)
	c, _, err := cluster.NewClient(config.Redis{URL: srv.URL(), Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s := redis.NewScript("return 1")
	ctx := context.Background()
	keys := []string{"k"}
	for _, parallel := range []bool{false, true} {
		b.Run("parallel="+strconv.FormatBool(parallel), func(b *testing.B) {
			b.ReportAllocs()
			if parallel {
				b.SetParallelism(32)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := s.Run(ctx, c, keys).Err(); err != nil {
							b.Fatal(err)
						}
					}
				})
				return
			}
			for b.Loop() {
				if err := s.Run(ctx, c, keys).Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
