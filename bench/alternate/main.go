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
// A target's own headers (-th name=Header: value) may vary per request:
// {r} and {s} are two numbers drawn for each request, independently and
// uniformly from 0 to the target's range minus one (-tr name=N), and
// {r%M} is r modulo M (bench/overhead.sh's 10,000 teams: key "sk-t{r%10000}"
// with session "s{r}"; its levels: key "sk-k{r}" with end user "u{s}").
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
	"strconv"
	"strings"
	"time"
)

type target struct {
	name, url string
	hdr       []header // its own headers, after the common ones
	rng       int      // the range of {r} and {s} (0: 1)
	client    *http.Client
	lat       []time.Duration // one per cycle, in cycle order (0: the request failed)
	errors    int
}

// header is a header of one target; value may hold {r}, {s} and {r%M}.
type header struct{ name, value string }

// expand fills a value's placeholders with the request's r and s.
func expand(v string, r, s int) (string, error) {
	if !strings.Contains(v, "{") {
		return v, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(v, "{")
		if i < 0 {
			b.WriteString(v)
			return b.String(), nil
		}
		j := strings.Index(v[i:], "}")
		if j < 0 {
			return "", fmt.Errorf("%q: a { without its }", v)
		}
		b.WriteString(v[:i])
		p := v[i+1 : i+j]
		switch {
		case p == "r":
			b.WriteString(strconv.Itoa(r))
		case p == "s":
			b.WriteString(strconv.Itoa(s))
		case strings.HasPrefix(p, "r%"):
			m, err := strconv.Atoi(p[2:])
			if err != nil || m <= 0 {
				return "", fmt.Errorf("{%s}: want {r%%M} with M > 0", p)
			}
			b.WriteString(strconv.Itoa(r % m))
		default:
			return "", fmt.Errorf("unknown placeholder {%s}: want {r}, {s} or {r%%M}", p)
		}
		v = v[i+j+1:]
	}
}

type list []string

func (l *list) String() string     { return strings.Join(*l, ", ") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var targets, headers, theaders, tranges list
	flag.Var(&targets, "t", "a target, name=URL (repeat; the first is the one the others are compared with)")
	flag.Var(&headers, "H", "a request header, 'Name: value' (repeat)")
	flag.Var(&theaders, "th", "a header of one target, 'name=Name: value' with {r}, {s}, {r%M} (repeat)")
	flag.Var(&tranges, "tr", "the range of a target's {r} and {s}, name=N (repeat)")
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
	byName := map[string]*target{}
	for _, t := range ts {
		byName[t.name] = t
	}
	for _, th := range theaders {
		name, h, ok := strings.Cut(th, "=")
		k, v, ok2 := strings.Cut(h, ":")
		if !ok || !ok2 || byName[name] == nil {
			fail("alternate: -th " + th + ": want name=Name: value for a -t name")
		}
		if _, err := expand(v, 0, 0); err != nil {
			fail("alternate: -th " + th + ": " + err.Error())
		}
		byName[name].hdr = append(byName[name].hdr, header{strings.TrimSpace(k), strings.TrimSpace(v)})
	}
	for _, tr := range tranges {
		name, n, ok := strings.Cut(tr, "=")
		v, err := strconv.Atoi(n)
		if !ok || err != nil || v <= 0 || byName[name] == nil {
			fail("alternate: -tr " + tr + ": want name=N, N > 0, for a -t name")
		}
		byName[name].rng = v
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
			lat, ok := send(t, body, hdr, rng)
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
func send(t *target, body []byte, hdr http.Header, rng *rand.Rand) (time.Duration, bool) {
	method := http.MethodGet
	if body != nil {
		method = http.MethodPost
	}
	req, err := http.NewRequest(method, t.url, bytes.NewReader(body))
	if err != nil {
		fail("alternate: " + t.name + ": " + err.Error())
	}
	req.Header = hdr.Clone()
	if len(t.hdr) > 0 {
		n := max(t.rng, 1)
		r, s := rng.IntN(n), rng.IntN(n)
		for _, h := range t.hdr {
			v, _ := expand(h.value, r, s) // checked when the flag was read
			req.Header.Set(h.name, v)
		}
	}
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
