package main

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// sample is one client request as the client saw it.
type sample struct {
	at       time.Duration // start, since the run began
	latency  time.Duration
	ok       bool
	served   string // X-Switchyard-Deployment, "" when nothing served
	attempts int    // X-Switchyard-Attempts
}

// load runs closed-loop clients against the cluster for dur, calling
// schedule's steps at their offsets from a goroutine of its own, and
// returns every request. It stops by itself.
func load(c *cluster, clients int, dur time.Duration, schedule []step) []sample {
	// every request is its own conversation: identical bodies would share
	// one session fingerprint and session keeping would pin them all
	var seq atomic.Int64
	var (
		mu  sync.Mutex
		all []sample
	)
	start := time.Now()
	deadline := start.Add(dur)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, s := range schedule {
			if d := time.Until(start.Add(s.at)); d > 0 {
				time.Sleep(d)
			}
			s.do()
		}
	}()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []sample
			for time.Now().Before(deadline) {
				body := fmt.Appendf(nil, `{"model":"m","messages":[{"role":"user","content":"hello %d"}]}`, seq.Add(1))
				req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer sk-bench")
				w := httptest.NewRecorder()
				t0 := time.Now()
				c.handler().ServeHTTP(w, req)
				n, _ := strconv.Atoi(w.Header().Get("X-Switchyard-Attempts"))
				mine = append(mine, sample{at: t0.Sub(start), latency: time.Since(t0), ok: w.Code == 200,
					served: w.Header().Get("X-Switchyard-Deployment"), attempts: n})
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	<-done
	slices.SortFunc(all, func(a, b sample) int { return int(a.at - b.at) })
	return all
}

// step is a change to the upstreams at an offset into the run.
type step struct {
	at time.Duration
	do func()
}

// p99 of the latencies of the samples started in [from, to) that keep.
func p99(all []sample, from, to time.Duration, keep func(sample) bool) time.Duration {
	var lat []time.Duration
	for _, s := range all {
		if s.at >= from && s.at < to && keep(s) {
			lat = append(lat, s.latency)
		}
	}
	if len(lat) == 0 {
		return 0
	}
	return percentile(lat, 99)
}

// percentile sorts lat and returns its q-th percentile.
func percentile(lat []time.Duration, q int) time.Duration {
	slices.Sort(lat)
	return lat[len(lat)*q/100]
}
