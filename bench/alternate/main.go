// Command alternate measures the latency of one request at a time against
// several targets in turn, for SPEC 16's one-at-a-time figure (the
// gateway's p50 over the floor's). wrk measures each target in a phase of
// its own, seconds apart from the other's, so the machine's drift between
// phases (another process's burst, a frequency step) lands in one target's
// figure and not the other's: on the 2-core benchmark machine one round's
// gateway-minus-floor p50 moved between -33 and +132 µs for the same code.
// Here every cycle sends one request to each target, in an order shuffled
// per cycle (a seeded PRNG, so no target always follows another), over one
// keep-alive connection per target: both see the same moments of the
// machine, and the per-cycle differences pair them request by request.
//
//	alternate -d 5s -body req.json -H 'Authorization: Bearer sk-bench' \
//	    -t floor=http://127.0.0.1:19003/v1/chat/completions \
//	    -t gateway=http://127.0.0.1:19002/v1/chat/completions
//
// It prints one line per target and one per target after the first:
//
//	ALT name requests errors p50-us p90-us p99-us
//	PAIR name first p50-difference-us median-of-cycle-differences-us
//
// The client is Go's net/http, which adds its own microseconds to every
// request of every target alike; the differences, not the absolute
// figures, are what it is for. Bounded: it stops after -d (and -warmup),
// each request within -timeout.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
)

type target struct {
	name, url string
	client    *http.Client
	lat       []time.Duration // one per cycle, in cycle order (0: the request failed)
	errors    int
}

type list []string

func (l *list) String() string     { return strings.Join(*l, ", ") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var targets, headers list
	flag.Var(&targets, "t", "a target, name=URL (repeat; the first is the one the others are compared with)")
	flag.Var(&headers, "H", "a request header, 'Name: value' (repeat)")
	bodyFile := flag.String("body", "", "file holding the POST body (empty: GET)")
	d := flag.Duration("d", 5*time.Second, "how long to measure")
	warmup := flag.Duration("warmup", 500*time.Millisecond, "how long to send unmeasured first")
	timeout := flag.Duration("timeout", 5*time.Second, "per request")
	seed := flag.Uint64("seed", 1, "seed of the per-cycle order")
	flag.Parse()
	if len(targets) < 2 {
		fail("alternate: needs at least two -t name=URL")
	}
	var body []byte
	if *bodyFile != "" {
		b, err := os.ReadFile(*bodyFile)
		if err != nil {
			fail("alternate: -body: " + err.Error())
		}
		body = b
	}
	hdr := http.Header{}
	for _, h := range headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			fail("alternate: -H " + h + ": want 'Name: value'")
		}
		hdr.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	ts := make([]*target, len(targets))
	for i, t := range targets {
		name, url, ok := strings.Cut(t, "=")
		if !ok {
			fail("alternate: -t " + t + ": want name=URL")
		}
		// one keep-alive connection per target, as wrk -c1 holds
		tr := &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, DisableCompression: true}
		ts[i] = &target{name: name, url: url, client: &http.Client{Transport: tr, Timeout: *timeout}}
	}
	rng := rand.New(rand.NewPCG(*seed, 0))
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	cycle := func(record bool) {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			t := ts[i]
			lat, ok := send(t, body, hdr)
			if !record {
				continue
			}
			if !ok {
				t.errors++
				lat = 0
			}
			t.lat = append(t.lat, lat)
		}
	}
	for end := time.Now().Add(*warmup); time.Now().Before(end); {
		cycle(false)
	}
	for end := time.Now().Add(*d); time.Now().Before(end); {
		cycle(true)
	}
	first := ts[0]
	for _, t := range ts {
		ok := served(t.lat)
		fmt.Printf("ALT %s %d %d %.1f %.1f %.1f\n", t.name, len(ok), t.errors, us(pct(ok, 50)), us(pct(ok, 90)), us(pct(ok, 99)))
	}
	for _, t := range ts[1:] {
		var diffs []time.Duration
		for c := range t.lat {
			if t.lat[c] > 0 && first.lat[c] > 0 {
				diffs = append(diffs, t.lat[c]-first.lat[c])
			}
		}
		fmt.Printf("PAIR %s %s %.1f %.1f\n", t.name, first.name, us(pct(served(t.lat), 50)-pct(served(first.lat), 50)), us(pct(diffs, 50)))
	}
}

// send makes one request and reads the whole answer; ok is a 200.
func send(t *target, body []byte, hdr http.Header) (time.Duration, bool) {
	method := http.MethodGet
	if body != nil {
		method = http.MethodPost
	}
	req, err := http.NewRequest(method, t.url, bytes.NewReader(body))
	if err != nil {
		fail("alternate: " + t.name + ": " + err.Error())
	}
	req.Header = hdr.Clone()
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, false
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return time.Since(start), err == nil && resp.StatusCode == http.StatusOK
}

// served is the latencies of the requests that succeeded.
func served(lat []time.Duration) []time.Duration {
	out := make([]time.Duration, 0, len(lat))
	for _, l := range lat {
		if l > 0 {
			out = append(out, l)
		}
	}
	return out
}

// pct is the p-th percentile (nearest rank) of v; 0 when v is empty.
func pct(v []time.Duration, p int) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func fail(msg string) {
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(2)
}
