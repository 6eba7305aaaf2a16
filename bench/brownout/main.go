// Command brownout is the brownout experiment of the routing issues: three
// simulated deployments behind one public model; after a third of the run
// one of them turns slow (10x time to first byte), after two thirds it also
// fails half of its requests. For every strategy it prints the success
// rate, p50/p99 latency seen by clients, and the share of traffic the sick
// deployment received after it turned sick. The sick deployment is the
// cheapest (half price), so cost-aware strategies are tempted by it. Everything runs in process on
// simulated providers, so it needs no network and stops by itself.
//
//	go run ./bench/brownout [-duration 6s] [-clients 16]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/config"
	"switchyard/gateway"
	"switchyard/providers"
)

const yamlTmpl = `
data_dir: ""
providers:
  - {name: p1, kind: simulated, simulate: {ttfb: 20ms, tokens_per_second: 0, output_tokens: 16}}
  - {name: p2, kind: simulated, simulate: {ttfb: 20ms, tokens_per_second: 0, output_tokens: 16}}
  - {name: p3, kind: simulated, simulate: {ttfb: 20ms, tokens_per_second: 0, output_tokens: 16}}
deployments:
  - {id: healthy-1, model: m, provider: p1, price: {input: 1, output: 2}}
  - {id: healthy-2, model: m, provider: p2, price: {input: 1, output: 2}}
  - {id: sick, model: m, provider: p3, price: {input: 0.5, output: 1}}
models: [{name: m, strategy: STRATEGY, objective: OBJECTIVE}]
teams: [{name: t, keys: ["sk-bench"], models: ["*"]}]
routing: {cooldown_base: 2s, failures_before_cooldown: 3}
`

type result struct {
	strategy              string
	ok, total             int64
	p50, p99              time.Duration
	sickShare             float64
	sickAfter, totalAfter int64
}

func main() {
	dur := flag.Duration("duration", 6*time.Second, "run length per strategy")
	clients := flag.Int("clients", 16, "concurrent clients")
	only := flag.String("strategies", "simple_shuffle,round_robin,least_busy,latency,cost,usage,adaptive,adaptive:latency", "strategies to run (adaptive:OBJECTIVE picks the objective)")
	flag.Parse()
	fmt.Printf("brownout: 3 deployments (ttfb 20ms); 'sick' turns 10x slow at %s and fails 50%% from %s; %d clients, %s per strategy\n\n",
		*dur/3, 2**dur/3, *clients, *dur)
	fmt.Printf("%-17s %9s %9s %9s %14s\n", "strategy", "success", "p50", "p99", "sick share")
	for _, s := range strings.Split(*only, ",") {
		r, err := run(s, *dur, *clients)
		if err != nil {
			fmt.Fprintln(os.Stderr, s+":", err)
			os.Exit(1)
		}
		fmt.Printf("%-17s %8.2f%% %9s %9s %13.1f%%\n", r.strategy, 100*float64(r.ok)/float64(r.total),
			r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), 100*r.sickShare)
	}
}

func run(strategy string, dur time.Duration, clients int) (*result, error) {
	name, objective, _ := strings.Cut(strategy, ":")
	if objective == "" {
		objective = "balanced"
	}
	cfg, err := config.Load([]byte(strings.NewReplacer("STRATEGY", name, "OBJECTIVE", objective).Replace(yamlTmpl)), nil)
	if err != nil {
		return nil, err
	}
	node, err := gateway.Assemble(cfg, gateway.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: 7})
	if err != nil {
		return nil, err
	}
	defer node.Close(context.Background())
	sick, ok := node.Adapters["p3"].(providers.Tunable)
	if !ok {
		return nil, fmt.Errorf("simulated adapter is not tunable")
	}
	h := node.Handler()
	// every request is its own conversation: identical bodies would share
	// one session fingerprint and session keeping would pin them all
	var seq atomic.Int64

	var (
		mu         sync.Mutex
		lat        []time.Duration
		okN, total atomic.Int64
		phase      atomic.Int32 // 0 healthy, 1 slow, 2 slow and failing
	)
	start := time.Now()
	deadline := start.Add(dur)
	var sickBefore, allBefore float64
	go func() {
		time.Sleep(dur / 3)
		sickBefore, allBefore = attempts(node)
		p := sick.Profile()
		p.TTFB *= 10
		sick.SetProfile(p)
		phase.Store(1)
		time.Sleep(dur / 3)
		p.ErrorRate, p.ErrorStatus = 0.5, 503
		sick.SetProfile(p)
		phase.Store(2)
	}()
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				body := fmt.Appendf(nil, `{"model":"m","messages":[{"role":"user","content":"hello %d"}]}`, seq.Add(1))
				req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer sk-bench")
				w := httptest.NewRecorder()
				t0 := time.Now()
				h.ServeHTTP(w, req)
				d := time.Since(t0)
				total.Add(1)
				if w.Code == 200 {
					okN.Add(1)
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sickEnd, allEnd := attempts(node)
	slices.Sort(lat)
	r := &result{strategy: strategy, ok: okN.Load(), total: total.Load(),
		sickAfter: int64(sickEnd - sickBefore), totalAfter: int64(allEnd - allBefore)}
	if len(lat) > 0 {
		r.p50, r.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	if r.totalAfter > 0 {
		r.sickShare = float64(r.sickAfter) / float64(r.totalAfter)
	}
	return r, nil
}

// attempts reads the upstream attempts counter: attempts on the sick
// deployment and on all of them, failovers included.
func attempts(node *gateway.Node) (sick, all float64) {
	mfs, _ := node.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "switchyard_upstream_attempts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue()
			all += v
			for _, l := range m.GetLabel() {
				if l.GetName() == "deployment" && l.GetValue() == "sick" {
					sick += v
				}
			}
		}
	}
	return sick, all
}
