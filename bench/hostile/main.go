// Command hostile runs issue 15's hostile clients and upstreams against a
// switchyard binary on loopback and prints, per phase, the gateway's RSS
// before / peak / after and its goroutines before / after, with what each
// client got and how fast. It starts the gateway itself (short timeouts:
// read_header 2s, read 1s, write 1s) and an in-process upstream that echoes
// its key, sends an endless SSE event, or streams without end. Every phase
// is bounded; every process it starts is stopped when it exits.
//
//	go run ./bench/hostile -gateway ./switchyard [-conns 200] [-uploads 40] [-inflight BYTES]
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const upstreamKey = "sk-upstream-ECHOED-SECRET-0123456789"

func main() {
	bin := flag.String("gateway", "", "path to the switchyard binary (required)")
	conns := flag.Int("conns", 200, "connections per slow-client phase")
	uploads := flag.Int("uploads", 40, "concurrent authenticated ~10 MiB uploads in the upload phase")
	inflight := flag.Int64("inflight", 0, "the gateway's server.max_inflight_body_bytes (0: its default, 160 MiB here)")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "hostile: -gateway PATH is required")
		os.Exit(2)
	}
	if err := run(*bin, *conns, *uploads, *inflight); err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(1)
	}
}

func run(bin string, conns, uploads int, inflight int64) error {
	up := httptest.NewServer(upstream())
	defer up.Close()
	dir, err := os.MkdirTemp("", "hostile")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := fmt.Sprintf(`server: {listen: %q, read_header_timeout: 2s, read_timeout: 1s, write_timeout: 1s, idle_timeout: 5s, upstream_timeout: 10s, request_timeout: 60s, max_inflight_body_bytes: %d}
data_dir: ""
admin: {key: adm}
providers:
  - {name: up, kind: openai, base_url: "%s/v1", api_key: %q}
deployments:
  - {id: echo, model: echo, provider: up}
  - {id: endless, model: endless, provider: up}
  - {id: fine, model: fine, provider: up}
  - {id: hose, model: hose, provider: up}
  - {id: emb, model: emb, provider: up, operations: [embeddings]}
routing:
  fallbacks: [{primary: endless, reason: general, models: [fine]}]
teams:
  - {name: t, keys: ["sk-hostile"], models: ["*"]}
`, addr, inflight, up.URL, upstreamKey)
	cfgPath := filepath.Join(dir, "gw.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	logPath := filepath.Join(dir, "gw.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "-config", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	g := &gw{addr: addr, pid: cmd.Process.Pid}
	if err := g.waitReady(10 * time.Second); err != nil {
		return err
	}
	// warm up: one of each request, so the baseline holds the steady state
	for _, m := range []string{"fine", "echo"} {
		g.chat(m, false, "")
	}
	g.settle()
	fmt.Printf("hostile: gateway pid %d on %s; RSS %.1f MiB, %d goroutines at start\n\n", g.pid, addr, mib(g.rss()), g.goroutines())
	fmt.Printf("%-44s %9s %9s %9s %6s %6s  %s\n", "phase", "rss0 MiB", "peak MiB", "after", "gr0", "grAft", "result")

	phases := []struct {
		name string
		fn   func(*gw) string
	}{
		{fmt.Sprintf("%d slow 10 MiB bodies, no key", conns), func(g *gw) string { return g.slowBodies(conns, "") }},
		{fmt.Sprintf("%d slow 10 MiB bodies, with key", conns), func(g *gw) string { return g.slowBodies(conns, "sk-hostile") }},
		{fmt.Sprintf("%d ~10 MiB uploads in 0.5s each, with key", uploads), func(g *gw) string { return g.slowUploads(uploads) }},
		{fmt.Sprintf("%d never-ending headers", conns), func(g *gw) string { return g.slowHeaders(conns) }},
		{"20x 806k messages + 20x 3M inputs, no key", func(g *gw) string { return g.hugeShapes(20, "") }},
		{"20x 806k messages + 20x 3M inputs, key", func(g *gw) string { return g.hugeShapes(20, "sk-hostile") }},
		{"20 stream clients that never read", func(g *gw) string { return g.stalledReaders(20) }},
		{"10 endless upstream SSE events", func(g *gw) string { return g.endlessEvents(10) }},
		{"20 requests to an upstream echoing its key", func(g *gw) string { return g.keyEcho(20) }},
	}
	start := g.rss()
	startGR := g.goroutines()
	overallPeak := start
	for _, p := range phases {
		r0, gr0 := g.rss(), g.goroutines()
		stop := g.sampleRSS()
		res := p.fn(g)
		g.settle()
		peak := stop()
		overallPeak = max(overallPeak, peak)
		fmt.Printf("%-44s %9.1f %9.1f %9.1f %6d %6d  %s\n", p.name, mib(r0), mib(peak), mib(g.rss()), gr0, g.goroutines(), res)
	}
	// idle keep-alive connections close after idle_timeout (5s here); the
	// gateway's pooled upstream connections stay (2 goroutines each)
	time.Sleep(6 * time.Second)
	g.settle()
	logs, _ := os.ReadFile(logPath)
	leak := "none"
	if bytes.Contains(logs, []byte(upstreamKey)) || bytes.Contains(logs, []byte("ECHOED")) {
		leak = "THE UPSTREAM KEY IS IN THE LOG"
	}
	fmt.Printf("\noverall: RSS %.1f MiB before, %.1f MiB peak, %.1f MiB after; goroutines %d before, %d after (idle_timeout passed); key in gateway log: %s\n",
		mib(start), mib(overallPeak), mib(g.rss()), startGR, g.goroutines(), leak)
	return nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// upstream serves the hostile upstream behaviours by upstream model name.
func upstream() http.Handler {
	chunk := `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + strings.Repeat("x", 200) + `"}}]}`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20)) // a large upload forwarded whole
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("X-Request-Id", "req-"+key)
		switch {
		case bytes.Contains(body, []byte(`"echo"`)):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s.","type":"invalid_request_error","code":"invalid_api_key"}}`, key)
		case bytes.Contains(body, []byte(`"endless"`)):
			w.Header().Set("Content-Type", "text/event-stream")
			line := "data: " + strings.Repeat("y", 64<<10) + "\n"
			for i := 0; i < 1024 && r.Context().Err() == nil; i++ { // 64 MiB at most
				if _, err := io.WriteString(w, line); err != nil {
					return
				}
			}
		case bytes.Contains(body, []byte(`"hose"`)):
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; i < 2_000_000 && r.Context().Err() == nil; i++ {
				if _, err := io.WriteString(w, "data: "+chunk+"\n\n"); err != nil {
					return
				}
			}
		case bytes.Contains(body, []byte(`"stream":true`)):
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", chunk)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
		}
	})
}

// noKeepAlive closes each connection after its answer, so the gateway's
// goroutine count is not inflated by this program's idle connections.
var noKeepAlive = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

type gw struct {
	addr string
	pid  int
}

func (g *gw) waitReady(d time.Duration) error {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if resp, err := http.Get("http://" + g.addr + "/healthz"); err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("gateway not ready on %s after %s", g.addr, d)
}

// rss is the gateway's resident set size from /proc.
func (g *gw) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// goroutines reads go_goroutines from the gateway's /metrics.
func (g *gw) goroutines() int { return int(g.metric("go_goroutines")) }

// sampleRSS samples RSS every 20ms until the returned stop, which returns
// the peak.
func (g *gw) sampleRSS() func() int64 {
	var peak atomic.Int64
	peak.Store(g.rss())
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if r := g.rss(); r > peak.Load() {
					peak.Store(r)
				}
			}
		}
	}()
	return func() int64 { close(done); wg.Wait(); return peak.Load() }
}

// settle waits (bounded, 15s) until the gateway's goroutine count has held
// still for a second, so "after" is measured once the phase's connections
// are gone (a closing connection lingers 500ms in net/http).
func (g *gw) settle() {
	prev, still := -1, 0
	for i := 0; i < 60 && still < 4; i++ {
		n := g.goroutines()
		if n == prev {
			still++
		} else {
			still = 0
		}
		prev = n
		time.Sleep(250 * time.Millisecond)
	}
}

func (g *gw) dial() (net.Conn, error) { return net.DialTimeout("tcp", g.addr, 5*time.Second) }

// statuses renders a status histogram.
func statuses(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s x%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

type tally struct {
	mu      sync.Mutex
	m       map[string]int
	slowest time.Duration
}

func (t *tally) add(k string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]int{}
	}
	t.m[k]++
	t.slowest = max(t.slowest, d)
}

// slowBodies opens n connections announcing 10 MiB and sending one byte,
// and records what each gets and when the server closes it.
func (g *gw) slowBodies(n int, key string) string {
	t := g.eachConn(n, func(c net.Conn, t *tally) {
		start := time.Now()
		hdr := "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 10485760\r\n"
		if key != "" {
			hdr += "Authorization: Bearer " + key + "\r\n"
		}
		_, _ = io.WriteString(c, hdr+"\r\n{")
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.add("no answer", time.Since(start))
			return
		}
		resp.Body.Close()
		closed := readUntilClosed(c, 20*time.Second)
		t.add(fmt.Sprintf("%d+%s", resp.StatusCode, closed), time.Since(start))
	})
	return statuses(t.m) + fmt.Sprintf("; slowest close %s", t.slowest.Round(time.Millisecond))
}

// eachConn runs fn on n connections at once and waits for all of them.
func (g *gw) eachConn(n int, fn func(c net.Conn, t *tally)) *tally {
	t := &tally{}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := g.dial()
			if err != nil {
				t.add("dial error", 0)
				return
			}
			defer c.Close()
			fn(c, t)
		}()
	}
	wg.Wait()
	return t
}

// readUntilClosed reads until the server closes c: "closed" or "open".
func readUntilClosed(c net.Conn, d time.Duration) string {
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return "open"
			}
			return "closed"
		}
	}
}

// slowUploads sends n authenticated chat bodies of 10 MiB minus 1 KiB at
// once, each in 512 KiB writes 25ms apart (about 0.5s, inside the 1s
// read_timeout), and reports the answers and the peak of the gateway's
// switchyard_body_bytes_in_flight. Without a node-wide body budget they all
// held their whole buffer together (40 peaked at 607-736 MiB RSS); with it,
// the uploads past server.max_inflight_body_bytes get 503 at once.
func (g *gw) slowUploads(n int) string {
	const size, piece = 10<<20 - 1<<10, 512 << 10
	head, tail := `{"model":"fine","messages":[{"role":"user","content":"`, `"}]}`
	body := []byte(head + strings.Repeat("x", size-len(head)-len(tail)) + tail)
	var peak atomic.Int64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if v := g.metric("switchyard_body_bytes_in_flight"); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	t := g.eachConn(n, func(c net.Conn, t *tally) {
		start := time.Now()
		go func() {
			if _, err := fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer sk-hostile\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", len(body)); err != nil {
				return
			}
			for off := 0; off < len(body); off += piece {
				if _, err := c.Write(body[off:min(off+piece, len(body))]); err != nil {
					return // answered (503) and closed: the rest is never read
				}
				time.Sleep(25 * time.Millisecond)
			}
		}()
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.add("no answer", time.Since(start))
			return
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		code := ""
		if i := bytes.Index(b, []byte(`"code":"`)); i >= 0 {
			code = string(b[i+8:])
			code = " " + code[:strings.IndexByte(code, '"')]
		}
		t.add(fmt.Sprintf("%d%s", resp.StatusCode, code), time.Since(start))
	})
	close(done)
	<-sampled
	return statuses(t.m) + fmt.Sprintf("; body bytes in flight peak %.1f MiB; slowest %s", mib(peak.Load()), t.slowest.Round(time.Millisecond))
}

// metric reads one unlabelled gauge or counter from the gateway's /metrics
// (-1 when it is missing).
func (g *gw) metric(name string) int64 {
	resp, err := http.Get("http://" + g.addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int64(f)
		}
	}
	return -1
}

// slowHeaders opens n connections whose headers never end.
func (g *gw) slowHeaders(n int) string {
	t := g.eachConn(n, func(c net.Conn, t *tally) {
		start := time.Now()
		_, _ = io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nX-Slow: "+strings.Repeat("a", 1000))
		t.add(readUntilClosed(c, 20*time.Second), time.Since(start))
	})
	return statuses(t.m) + fmt.Sprintf("; slowest close %s", t.slowest.Round(time.Millisecond))
}

func repeatJSON(prefix, elem, suffix string, n int) []byte {
	var b bytes.Buffer
	b.WriteString(prefix)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem)
	}
	b.WriteString(suffix)
	return b.Bytes()
}

// hugeShapes sends n chat bodies of 806k tiny messages and n embedding
// bodies of 3M empty arrays, concurrently.
func (g *gw) hugeShapes(n int, key string) string {
	chat := repeatJSON(`{"model":"fine","messages":[`, `{"role":"u"}`, `]}`, 806_000)
	emb := repeatJSON(`{"model":"emb","input":[`, `[]`, `]}`, 3_000_000)
	var t tally
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; i < 2*n; i++ {
		path, body := "/v1/chat/completions", chat
		if i%2 == 1 {
			path, body = "/v1/embeddings", emb
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", "http://"+g.addr+path, bytes.NewReader(body))
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.add("error (upload cut after the answer)", time.Since(start))
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			code := ""
			if i := bytes.Index(b, []byte(`"code":"`)); i >= 0 {
				code = string(b[i+8:])
				code = code[:strings.IndexByte(code, '"')]
			}
			t.add(fmt.Sprintf("%d %s", resp.StatusCode, code), time.Since(start))
		}()
	}
	wg.Wait()
	return statuses(t.m) + fmt.Sprintf("; slowest answer %s", t.slowest.Round(time.Millisecond))
}

// stalledReaders starts n streams from an upstream that never ends and
// never reads them; it reports how long until the gateway closes each.
func (g *gw) stalledReaders(n int) string {
	body := `{"model":"hose","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	var during atomic.Int64
	go func() { time.Sleep(500 * time.Millisecond); during.Store(int64(g.goroutines())) }()
	t := g.eachConn(n, func(c net.Conn, t *tally) {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4 << 10)
		}
		start := time.Now()
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer sk-hostile\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		// never read; wait (bounded) for the server to give up on us
		time.Sleep(8 * time.Second)
		t.add("cut off", time.Since(start))
	})
	return statuses(t.m) + fmt.Sprintf("; goroutines while stalled %d", during.Load())
}

func (g *gw) chat(model string, stream bool, id string) (int, http.Header, string) {
	body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, model, stream)
	req, _ := http.NewRequest("POST", "http://"+g.addr+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-hostile")
	if id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := noKeepAlive.Do(req.WithContext(ctx))
	if err != nil {
		return 0, nil, err.Error()
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header, string(b)
}

// endlessEvents asks for n streams whose primary sends one endless event.
func (g *gw) endlessEvents(n int) string {
	var t tally
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			st, h, _ := g.chat("endless", true, "")
			t.add(fmt.Sprintf("%d from %s degraded=%s", st, h.Get("X-Switchyard-Deployment"), h.Get("X-Switchyard-Degraded")), time.Since(start))
		}()
	}
	wg.Wait()
	return statuses(t.m) + fmt.Sprintf("; slowest %s", t.slowest.Round(time.Millisecond))
}

// keyEcho calls an upstream that answers 401 quoting its key, and checks
// the body, the headers and the audit entry.
func (g *gw) keyEcho(n int) string {
	var t tally
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("echo-%d", i)
		st, h, body := g.chat("echo", false, id)
		var hb strings.Builder
		_ = h.Write(&hb)
		req, _ := http.NewRequest("GET", "http://"+g.addr+"/admin/requests/"+id, nil)
		req.Header.Set("Authorization", "Bearer adm")
		audit := ""
		if resp, err := noKeepAlive.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			audit = string(b)
		}
		leaked := strings.Contains(body+hb.String()+audit, "ECHOED")
		t.add(fmt.Sprintf("%d leaked=%v", st, leaked), 0)
	}
	return statuses(t.m)
}
