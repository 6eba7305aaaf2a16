// Command brownout is the brownout experiment of the routing issues, in
// process on simulated providers (no network; it stops by itself), over N
// gateway replicas that share one Redis (-replicas; a redis-server is
// started for the run unless -redis names one, and -replicas 1 without
// Redis runs local-only).
//
// Scenario "table" (the default): three deployments behind one public
// model; after a third of the run one of them turns slow (10x time to first
// byte), after two thirds it also fails half of its requests. For every
// strategy it prints the success rate, p50/p99 latency seen by clients, and
// the share of traffic the sick deployment received after it turned sick.
// The sick deployment is the cheapest (half price), so cost-aware
// strategies are tempted by it.
//
// Scenarios "brownout" and "outage" (issue 14) measure rediscovery, with
// every routing knob at its default: brownout is healthy, 10x slow, slow
// and failing 50%, recovered; outage is healthy, failing every request for
// -outage (a minute: the cooldown escalates), recovered. Each prints the
// success rate, the clients' p99 while healthy and during the bad phases
// (and their ratio: the cost of probing), the seconds from recovery until
// the sick deployment serves 15% of the requests of a trailing second, its
// share of the recovered phase, and the recovery probes by outcome.
//
//	go run ./bench/brownout [-duration 6s] [-clients 16]
//
// -probe-interval sets routing.probe_interval for the recovery scenarios.
//
//	go run ./bench/brownout -scenarios brownout,outage -strategies adaptive,latency -replicas 1,3
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"switchyard/config"
)

// benchYAML is the setup every scenario runs: two healthy deployments and
// the one that gets sick, priced sickPrice (STRATEGY and OBJECTIVE are
// replaced per run).
func benchYAML(sickPrice string) string {
	return `
data_dir: ""
providers:
  - {name: p1, kind: simulated, simulate: {ttfb: 20ms, tokens_per_second: 0, output_tokens: 16}}
  - {name: p2, kind: simulated, simulate: {ttfb: 20ms, tokens_per_second: 0, output_tokens: 16}}
  - {name: p3, kind: simulated, simulate: {ttfb: 20ms, tokens_per_second: 0, output_tokens: 16}}
deployments:
  - {id: healthy-1, model: m, provider: p1, price: {input: 1, output: 2}}
  - {id: healthy-2, model: m, provider: p2, price: {input: 1, output: 2}}
  - {id: sick, model: m, provider: p3, price: ` + sickPrice + `}
models: [{name: m, strategy: STRATEGY, objective: OBJECTIVE}]
teams: [{name: t, keys: ["sk-bench"], models: ["*"]}]
`
}

// yamlTmpl is the table and brownout setup: the sick deployment is the
// cheapest (cost-aware strategies are drawn to it), and cooldowns are short.
var yamlTmpl = benchYAML("{input: 0.5, output: 1}") + "routing: {cooldown_base: 2s, failures_before_cooldown: 3}\n"

func main() {
	dur := flag.Duration("duration", 6*time.Second, "table: run length per strategy")
	clients := flag.Int("clients", 16, "concurrent clients")
	only := flag.String("strategies", "", "strategies to run (adaptive:OBJECTIVE picks the objective); default every strategy for table, adaptive,latency otherwise")
	which := flag.String("scenarios", "table", "table, brownout, outage (comma-separated)")
	reps := flag.String("replicas", "1", "replica counts to run (comma-separated), sharing one Redis")
	redisURL := flag.String("redis", "", "Redis for the replicas; empty: start a redis-server when a run has more than one replica")
	healthy := flag.Duration("healthy", 10*time.Second, "brownout/outage: healthy phase")
	bad := flag.Duration("bad", 10*time.Second, "brownout: length of the slow and of the slow+failing phase")
	outage := flag.Duration("outage", time.Minute, "outage: how long every request fails")
	after := flag.Duration("after", 30*time.Second, "brownout/outage: recovered phase")
	probe := flag.Duration("probe-interval", 0, "brownout/outage: routing.probe_interval (0: the default, a fifth of the current cooldown)")
	flag.Parse()
	if err := run(*dur, *clients, *only, *which, *reps, *redisURL, scenarios(*healthy, *bad, *outage, *after, *probe)); err != nil {
		fmt.Fprintln(os.Stderr, "brownout:", err)
		os.Exit(1)
	}
}

func run(dur time.Duration, clients int, only, which, reps, redisURL string, sc map[string]scenario) error {
	replicas := strings.Split(reps, ",")
	if redisURL == "" && (len(replicas) > 1 || replicas[0] != "1") {
		srv, err := startRedis()
		if err != nil {
			return err
		}
		defer srv.stop()
		redisURL = srv.url()
	}
	where := "local-only"
	if redisURL != "" {
		where = "sharing one Redis"
	}
	fmt.Printf("replicas %s, %s, %d closed-loop clients, round-robin over the replicas; loaded shared machine: figures are noisy\n\n", reps, where, clients)
	var names []string
	for _, n := range strings.Split(which, ",") {
		if n != "table" {
			names = append(names, n)
			continue
		}
		strategies := only
		if strategies == "" {
			strategies = "simple_shuffle,round_robin,least_busy,latency,cost,usage,adaptive,adaptive:latency"
		}
		if err := printTable(strings.Split(strategies, ","), replicas, dur, clients, redisURL); err != nil {
			return err
		}
	}
	if len(names) == 0 {
		return nil
	}
	if only == "" {
		only = "adaptive,latency"
	}
	return printRecovery(names, strings.Split(only, ","), replicas, clients, redisURL, sc)
}

func printTable(strategies, replicas []string, dur time.Duration, clients int, redisURL string) error {
	fmt.Printf("table: 3 deployments (ttfb 20ms); 'sick' turns 10x slow at %s and fails 50%% from %s; %s per strategy\n",
		dur/3, 2*dur/3, dur)
	fmt.Printf("%-17s %3s %9s %9s %9s %14s\n", "strategy", "rep", "success", "p50", "p99", "sick share")
	for _, s := range strategies {
		for _, rep := range replicas {
			var n int
			if _, err := fmt.Sscan(rep, &n); err != nil || n < 1 {
				return fmt.Errorf("-replicas: %q is not a positive number", rep)
			}
			r, err := runTable(s, n, dur, clients, redisURL)
			if err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
			fmt.Printf("%-17s %3d %8.2f%% %9s %9s %13.1f%%\n", r.strategy, n, 100*float64(r.ok)/float64(r.total),
				r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), 100*r.sickShare)
		}
	}
	fmt.Println()
	return nil
}

type result struct {
	strategy  string
	ok, total int64
	p50, p99  time.Duration
	sickShare float64
}

func runTable(strategy string, replicas int, dur time.Duration, clients int, redisURL string) (*result, error) {
	name, objective, _ := strings.Cut(strategy, ":")
	if objective == "" {
		objective = "balanced"
	}
	c, err := newCluster(strings.NewReplacer("STRATEGY", name, "OBJECTIVE", objective).Replace(yamlTmpl), replicas, redisURL)
	if err != nil {
		return nil, err
	}
	defer c.close()
	var before map[string]float64
	schedule := []step{
		{dur / 3, func() {
			before = c.counter("switchyard_upstream_attempts_total", "deployment")
			_ = c.tune("p3", func(p *config.Simulate) { p.TTFB *= 10 })
		}},
		{2 * dur / 3, func() { _ = c.tune("p3", func(p *config.Simulate) { p.ErrorRate, p.ErrorStatus = 0.5, 503 }) }},
	}
	all := load(c, clients, dur, schedule)
	end := c.counter("switchyard_upstream_attempts_total", "deployment")
	r := &result{strategy: strategy, total: int64(len(all))}
	var lat []time.Duration
	for _, s := range all {
		if s.ok {
			r.ok++
		}
		lat = append(lat, s.latency)
	}
	if len(lat) > 0 {
		r.p50, r.p99 = percentile(lat, 50), percentile(lat, 99)
	}
	sick, total := end["sick"]-before["sick"], 0.0
	for k, v := range end {
		total += v - before[k]
	}
	if total > 0 {
		r.sickShare = sick / total
	}
	return r, nil
}
