package ratelimit

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/internal/teamtest"
)

// benchTeam exercises every dimension of the script and is never rejected.
var benchTeam = teamtest.Team("bench", teamtest.Limits{RPM: 1e9, TPM: 1e12, Par: 1e6, USD: 1e9, Period: time.Hour})

func benchAdmit(b *testing.B, l *Local, parallel bool) {
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

// BenchmarkAdmit measures one node-local admission (and its release) per
// op; the shared one is benchmarked in package edge.
func BenchmarkAdmit(b *testing.B) {
	b.Run("local", func(b *testing.B) { benchAdmit(b, NewLocal(time.Now, 1), false) })
	b.Run("local-parallel", func(b *testing.B) { benchAdmit(b, NewLocal(time.Now, 1), true) })
}
