package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The node-wide body budget (server.max_inflight_body_bytes, SPEC 14),
// over real loopback HTTP against the production http.Server. Bodies of
// 1 MiB, a budget of 4 MiB: large uploads may grow into 3.5 MiB of it, the
// last 512 KiB is for first buffers (small requests).

const budgetMaxBody = 1 << 20

const budgetYAML = `
server: {max_body_bytes: 1048576, max_inflight_body_bytes: 4194304, read_header_timeout: 2s, read_timeout: 3s, write_timeout: 2s, idle_timeout: 5s, upstream_timeout: 5s, request_timeout: 20s}
admin: {key: adm}
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 8, context_tokens: 10000000}}
deployments:
  - {id: d1, model: m, provider: sim}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"]}
`

// budgetBody is a valid chat body of exactly n bytes.
func budgetBody(n int) string {
	head, tail := `{"model":"m","messages":[{"role":"user","content":"`, `"}]}`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// upload opens an authenticated chat request announcing contentLength and
// writes sent of its body in the background (a write the server refuses by
// closing is no failure here); the caller reads the answer.
func upload(t *testing.T, g *liveGateway, contentLength int, sent string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", g.addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-test\r\nContent-Length: %d\r\n\r\n", contentLength)
	go func() { _, _ = io.WriteString(c, head+sent) }()
	return c
}

// heldSampler records the highest reservation seen until stop.
func heldSampler(g *liveGateway) (stop func() int64) {
	var peak atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if h := g.node.bodies.held.Load(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-done:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	return func() int64 { close(done); wg.Wait(); return peak.Load() }
}

// waitHeld polls (bounded) until cond holds of the reservation.
func waitHeld(t *testing.T, g *liveGateway, what string, cond func(held int64) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond(g.node.bodies.held.Load()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: reservation %d", what, g.node.bodies.held.Load())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func metricLine(t *testing.T, g *liveGateway, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + g.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+" ") {
			return l
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return ""
}

// Twelve authenticated uploads announcing 1 MiB send all but their last
// byte and stall: together they would hold 12 MiB. The reservation never
// passes 4 MiB; the uploads it cannot hold get 503 with Retry-After and a
// message naming the key, counted in the metric; a small request is served
// while the others hold the budget; once the holders go away nothing is
// held.
func TestBodyBudgetBoundsConcurrentUploads(t *testing.T) {
	g := startGateway(t, budgetYAML, "")
	const uploads = 12
	// a buffer doubles up to the announced 1 MiB and would grow by one more
	// byte only once 1 MiB arrived: each holder reserves exactly 1 MiB
	const fullBuffer = budgetMaxBody
	body := budgetBody(budgetMaxBody)
	stop := heldSampler(g)

	type answer struct {
		status int
		resp   *http.Response
		body   string
	}
	answers := make(chan answer, uploads)
	conns := make([]net.Conn, uploads)
	for i := range conns {
		c := upload(t, g, budgetMaxBody, body[:budgetMaxBody-1])
		conns[i] = c
		go func() {
			st, resp := readStatus(t, c, 10*time.Second)
			a := answer{status: st, resp: resp}
			if resp != nil {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				a.body = string(b)
			}
			answers <- a
		}()
	}
	// the rejected answer at once; the rest hold complete buffers until read_timeout
	var rejected []answer
	early := time.After(2 * time.Second) // well inside read_timeout (3s)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	// until every upload is either answered or holds its whole buffer
	for h := int64(-1); h%fullBuffer != 0 || int(h/fullBuffer)+len(rejected) != uploads; h = g.node.bodies.held.Load() {
		select {
		case a := <-answers:
			if a.status != http.StatusServiceUnavailable {
				t.Fatalf("an upload answered %d before read_timeout: %s", a.status, a.body)
			}
			rejected = append(rejected, a)
		case <-tick.C:
		case <-early:
			t.Fatalf("uploads still reading after 2s: %d answered, %d bytes held", len(rejected), g.node.bodies.held.Load())
		}
	}
	holders := uploads - len(rejected)
	if holders < 1 || holders > 3 {
		t.Fatalf("%d uploads hold a whole 1 MiB buffer: want 1 to 3 within 3.5 MiB", holders)
	}
	for _, a := range rejected {
		if a.resp.Header.Get("Retry-After") != "1" || !strings.Contains(a.body, "body_budget_exhausted") ||
			!strings.Contains(a.body, "server.max_inflight_body_bytes") || !a.resp.Close {
			t.Fatalf("rejection: Retry-After %q, closes %v: %s", a.resp.Header.Get("Retry-After"), a.resp.Close, a.body)
		}
	}
	if n := strings.Count(g.logs.String(), "server.max_inflight_body_bytes: answering 503"); n != 1 {
		t.Errorf("%d body-budget warnings for %d rejections within seconds, want 1", n, len(rejected))
	}
	if got, want := metricLine(t, g, "switchyard_body_budget_rejected_total"), fmt.Sprintf("switchyard_body_budget_rejected_total %d", len(rejected)); got != want {
		t.Errorf("metric %q, want %q", got, want)
	}
	var gauge float64
	if _, err := fmt.Sscanf(metricLine(t, g, "switchyard_body_bytes_in_flight"), "switchyard_body_bytes_in_flight %g", &gauge); err != nil || gauge != float64(holders*fullBuffer) {
		t.Errorf("gauge %v (%v) while %d uploads hold %d bytes each", gauge, err, holders, fullBuffer)
	}

	// a small request is served while the large uploads hold the budget
	req, _ := http.NewRequest("POST", "http://"+g.addr+"/v1/chat/completions", strings.NewReader(budgetBody(600)))
	req.Header.Set("Authorization", "Bearer sk-test")
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("small request while the budget is held: %d %s", resp.StatusCode, b)
	}

	// the holders go away mid-body (408 has its own test below)
	for _, c := range conns {
		c.Close()
	}
	waitHeld(t, g, "after the holders left", func(h int64) bool { return h == 0 })
	if peak := stop(); peak > 4<<20 || peak < int64(holders)*fullBuffer {
		t.Fatalf("peak reservation %d bytes: want between %d and the budget (4 MiB)", peak, holders*fullBuffer)
	}
}

// Every way a request with a body ends gives its bytes back: served, 413
// (a chunked body over max_body_bytes), the client gone mid-body, 408,
// and count_tokens.
func TestBodyBudgetReleasedOnEveryExit(t *testing.T) {
	g := startGateway(t, strings.Replace(budgetYAML, "read_timeout: 3s", "read_timeout: 400ms", 1), "")
	client := &http.Client{Timeout: 5 * time.Second}
	post := func(path, body string) (int, string) {
		req, _ := http.NewRequest("POST", "http://"+g.addr+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-test")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	released := func(what string) {
		t.Helper()
		waitHeld(t, g, what+": the body is still held", func(h int64) bool { return h == 0 })
	}

	if st, b := post("/v1/chat/completions", budgetBody(900<<10)); st != 200 {
		t.Fatalf("900 KiB chat: %d %.300s", st, b)
	}
	released("served")
	if st, b := post("/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); st != 200 {
		t.Fatalf("count_tokens: %d %s", st, b)
	}
	released("count_tokens")

	// 413: chunked, so no Content-Length refuses it before the read
	c, err := net.DialTimeout("tcp", g.addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		_, _ = io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer sk-test\r\nTransfer-Encoding: chunked\r\n\r\n")
		chunk := strings.Repeat("x", 64<<10)
		for i := 0; i < 20; i++ { // 1.25 MiB
			if _, err := fmt.Fprintf(c, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
				return
			}
		}
		_, _ = io.WriteString(c, "0\r\n\r\n")
	}()
	if st, _ := readStatus(t, c, 5*time.Second); st != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked 1.25 MiB: %d, want 413", st)
	}
	released("413")

	// the client goes away with half its body sent
	gone := upload(t, g, budgetMaxBody, strings.Repeat("x", 600<<10))
	waitHeld(t, g, "the half body is never held", func(h int64) bool { return h > 512<<10 })
	gone.Close()
	released("client gone")

	// 408: the body stalls past read_timeout
	slow := upload(t, g, budgetMaxBody, strings.Repeat("x", 100<<10))
	waitHeld(t, g, "the slow body is never held", func(h int64) bool { return h > 64<<10 })
	if st, _ := readStatus(t, slow, 5*time.Second); st != http.StatusRequestTimeout {
		t.Fatalf("stalled body: %d, want 408", st)
	}
	released("408")
}

// The budget's arithmetic: a first buffer may use the whole budget, growth
// past it leaves the small-body share alone, nothing passes the size, and
// release gives back exactly what was taken, once.
func TestBodyLease(t *testing.T) {
	var b bodyBudget
	const size = 800
	big := bodyLease{budget: &b, size: size}
	if !big.grow(100) || !big.grow(600) { // 700 = size - size/8
		t.Fatal("growth within size - size/8 refused")
	}
	if big.grow(1) {
		t.Fatal("growth into the small-body share allowed")
	}
	small := bodyLease{budget: &b, size: size}
	if !small.grow(100) { // 800: a first buffer may use the share
		t.Fatal("a first buffer refused while the share is free")
	}
	other := bodyLease{budget: &b, size: size}
	if other.grow(1) || other.held != 0 {
		t.Fatalf("a first buffer allowed past the size (held %d)", b.held.Load())
	}
	big.release()
	big.release()
	if got := b.held.Load(); got != 100 {
		t.Fatalf("after releasing the big lease twice: %d held, want 100", got)
	}
	small.release()
	if got := b.held.Load(); got != 0 {
		t.Fatalf("after every release: %d held", got)
	}
}

// Reserving and releasing a small body allocates nothing and takes no lock
// (an uncontended compare-and-swap and an add).
func TestBodyLeaseAllocatesNothing(t *testing.T) {
	var b bodyBudget
	if n := testing.AllocsPerRun(100, func() {
		l := bodyLease{budget: &b, size: 1 << 20}
		_ = l.grow(600)
		l.release()
	}); n != 0 {
		t.Fatalf("%v allocations per lease", n)
	}
}

// chunkReader returns data in pieces of the sizes steps cycles through.
type chunkReader struct {
	data  []byte
	steps []byte
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(r.data)
	if len(r.steps) > 0 {
		n = min(n, int(r.steps[r.i%len(r.steps)])*97+1)
		r.i++
	}
	n = copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// readBounded with a lease, whatever the body, its pieces, the announced
// length, the limit and the budget: a body within both comes back whole
// and holds exactly its buffer; otherwise the error says which bound; the
// budget is never passed and is empty after release.
func FuzzReadBounded(f *testing.F) {
	f.Add([]byte(`{"model":"m"}`), []byte{1}, int64(13), int64(1<<17), int64(1<<19))
	f.Add(bytes.Repeat([]byte("x"), 70000), []byte{200, 3}, int64(-1), int64(100000), int64(50000))
	f.Add(bytes.Repeat([]byte("y"), 40000), []byte{}, int64(10), int64(30000), int64(1<<20))
	f.Fuzz(func(t *testing.T, data, steps []byte, announced, limit, size int64) {
		// readBody's contract: 0 <= announced <= limit, or -1 (unknown)
		if limit < 1 || limit > 1<<17 || size < 1 || size > 1<<19 || announced < -1 || announced > limit || len(data) > 1<<17 {
			return
		}
		var b bodyBudget
		lease := bodyLease{budget: &b, size: size}
		body, err := readBounded(&chunkReader{data: data, steps: steps}, announced, limit, &lease)
		if h := b.held.Load(); h > size || h != lease.held {
			t.Fatalf("held %d (lease %d) over a budget of %d", h, lease.held, size)
		}
		switch {
		case err == nil:
			if !bytes.Equal(body, data) || int64(cap(body)) != lease.held {
				t.Fatalf("body of %d bytes, cap %d, lease %d; sent %d", len(body), cap(body), lease.held, len(data))
			}
		case errors.Is(err, errBodyTooLarge):
			if int64(len(data)) <= limit {
				t.Fatalf("%d bytes within the limit %d called too large", len(data), limit)
			}
		case errors.Is(err, errBodyBudget):
		default:
			t.Fatalf("unexpected error %v", err)
		}
		lease.release()
		if b.held.Load() != 0 {
			t.Fatalf("%d held after release", b.held.Load())
		}
	})
}
