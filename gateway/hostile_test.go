package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"switchyard/config"
)

// The hostile-client and hostile-upstream tests of issue 15. They run the
// gateway's own http.Server (HTTPServer, with short timeouts) on a real
// loopback listener, so the server timeouts and write deadlines are the
// production ones. Every wait is bounded.

const upstreamKey = "sk-upstream-SECRET-0123456789"

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const hostileServer = `
server: {read_header_timeout: 1s, read_timeout: 300ms, write_timeout: 300ms, idle_timeout: 2s, upstream_timeout: 5s, request_timeout: 20s}
admin: {key: adm}
`

type liveGateway struct {
	node *Node
	addr string
	logs *syncBuffer
}

// startGateway serves yml (with ${UPSTREAM} replaced) on a loopback port
// through the production http.Server.
func startGateway(t *testing.T, yml, upstream string) *liveGateway {
	t.Helper()
	yml = strings.ReplaceAll(yml, "${UPSTREAM}", upstream)
	cfg, err := config.Load([]byte(yml), nil)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.DataDir = ""
	logs := &syncBuffer{}
	n, err := Assemble(cfg, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := n.HTTPServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		_ = n.Close(context.Background())
	})
	return &liveGateway{node: n, addr: ln.Addr().String(), logs: logs}
}

// rawRequest writes a request head (and an optional body prefix) on a new
// connection and returns it; the caller reads what it needs.
func (g *liveGateway) rawRequest(t *testing.T, path, key string, contentLength int, bodyPrefix string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", g.addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, contentLength)
	if key != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", key)
	}
	b.WriteString("\r\n")
	b.WriteString(bodyPrefix)
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	return c
}

// readStatus reads one response head within d; 0 when none arrived.
func readStatus(t *testing.T, c net.Conn, d time.Duration) (int, *http.Response) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, nil
	}
	return resp.StatusCode, resp
}

// closedWithin reports whether the server closes c within d (a read then
// returns EOF or a reset, not our own deadline).
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if ok := errorAs(err, &ne); ok && ne.Timeout() {
			return false
		}
		return true
	}
}

func errorAs(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

const simHostileYAML = hostileServer + `
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 8}}
deployments:
  - {id: d1, model: m, provider: sim}
  - {id: emb, model: e, provider: sim, operations: [embeddings]}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"]}
`

// Issue 15 reproduction: 30 connections announcing 10 MiB and sending one
// byte, with no key, held 300 MiB as long as they stayed open (the body was
// allocated from Content-Length and read before the key was checked). Now
// each gets 401 at once, without a body byte read, and is closed.
func TestSlowBodyWithoutKeyCostsNothing(t *testing.T) {
	g := startGateway(t, simHostileYAML, "")
	before := heapInUse()
	conns := make([]net.Conn, 30)
	for i := range conns {
		conns[i] = g.rawRequest(t, "/v1/chat/completions", "", 10<<20, "{")
	}
	for i, c := range conns {
		if st, _ := readStatus(t, c, 2*time.Second); st != http.StatusUnauthorized {
			t.Fatalf("connection %d: status %d, want 401 before the body arrives", i, st)
		}
	}
	if grew := int64(heapInUse()) - int64(before); grew > 8<<20 {
		t.Fatalf("30 unauthenticated 10 MiB announcements grew the heap by %d bytes", grew)
	}
	for i, c := range conns {
		if !closedWithin(c, 3*time.Second) {
			t.Fatalf("connection %d still open: the server must close an unread 10 MiB body", i)
		}
	}
}

// With a key the body is read, into a buffer that grows with the bytes that
// arrive, under read_timeout: the same 30 slow connections hold KiBs, and
// each gets 408 and is closed after read_timeout.
func TestSlowBodyWithKeyBoundedAndTimedOut(t *testing.T) {
	g := startGateway(t, simHostileYAML, "")
	before := heapInUse()
	conns := make([]net.Conn, 30)
	for i := range conns {
		conns[i] = g.rawRequest(t, "/v1/chat/completions", "sk-test", 10<<20, "{")
	}
	time.Sleep(100 * time.Millisecond) // let every handler start reading (bounded: read_timeout is 300ms)
	if grew := int64(heapInUse()) - int64(before); grew > 8<<20 {
		t.Fatalf("30 slow 10 MiB bodies grew the heap by %d bytes while open", grew)
	}
	for i, c := range conns {
		st, _ := readStatus(t, c, 3*time.Second)
		if st != http.StatusRequestTimeout {
			t.Fatalf("connection %d: status %d, want 408 after read_timeout", i, st)
		}
		if !closedWithin(c, 3*time.Second) {
			t.Fatalf("connection %d still open after its 408", i)
		}
	}
}

// Headers that never end are cut off by read_header_timeout.
func TestSlowHeadersClosed(t *testing.T) {
	g := startGateway(t, simHostileYAML, "")
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nX-Slow: ")
	if !closedWithin(c, 4*time.Second) {
		t.Fatal("a connection whose headers never end stays open past read_header_timeout")
	}
}

func manyMessages(n int) string {
	return `{"model":"m","messages":[` + strings.TrimSuffix(strings.Repeat(`{"role":"u"},`, n), ",") + `]}`
}

// Issue 15 reproduction: 806k tiny messages (10 MiB) allocated 354 MiB, and
// 3M empty embedding arrays about 1 GiB. Now: 401 without a key (the body
// is never read), 400 naming the limit with one, 413 over max_body_bytes.
func TestHugeShapesOverHTTP(t *testing.T) {
	// a 10 MiB upload under -race on a loaded machine needs more than 300ms
	g := startGateway(t, strings.Replace(simHostileYAML, "read_timeout: 300ms", "read_timeout: 20s", 1), "")
	chat := manyMessages(806_000)
	emb := `{"model":"e","input":[` + strings.TrimSuffix(strings.Repeat(`[],`, 3_000_000), ",") + `]}`
	cases := []struct {
		name, path, key, body string
		status                int
		code                  string
	}{
		{"messages, no key", "/v1/chat/completions", "", chat, 401, "invalid_api_key"},
		{"messages, key", "/v1/chat/completions", "sk-test", chat, 400, "too_many_messages"},
		{"inputs, no key", "/v1/embeddings", "", emb, 401, "invalid_api_key"},
		{"inputs, key", "/v1/embeddings", "sk-test", emb, 400, "too_many_inputs"},
		{"over max_body_bytes, key", "/v1/chat/completions", "sk-test", manyMessages(1_000_000), 413, "request_too_large"},
		{"over max_body_bytes, no key", "/v1/chat/completions", "", manyMessages(1_000_000), 401, "invalid_api_key"},
	}
	client := &http.Client{Timeout: 10 * time.Second}
	before := heapInUse()
	for _, tc := range cases {
		req, _ := http.NewRequest("POST", "http://"+g.addr+tc.path, strings.NewReader(tc.body))
		if tc.key != "" {
			req.Header.Set("Authorization", "Bearer "+tc.key)
		}
		resp, err := client.Do(req)
		if err != nil {
			// a 401/413 answered before the upload ended may reset the upload
			if tc.status == 401 || tc.status == 413 {
				continue
			}
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.code) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, resp.StatusCode, body, tc.status, tc.code)
		}
		if tc.status == 400 && !strings.Contains(string(body), "server.max_") {
			t.Errorf("%s: the 400 must name the limit: %s", tc.name, body)
		}
	}
	if grew := int64(heapInUse()) - int64(before); grew > 32<<20 {
		t.Errorf("hostile shapes left the heap %d bytes larger", grew)
	}
}

// echoUpstream is an upstream that echoes its credential wherever it can:
// in a 401, in a 400 message, in a response header.
func echoUpstream() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("X-Request-Id", "req-"+key)
		w.Header().Set("Content-Type", "application/json")
		body, _ := io.ReadAll(r.Body)
		switch {
		case bytes.Contains(body, []byte(`"up-auth"`)):
			w.WriteHeader(401)
			fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s. You can find your API key at https://platform.example.com/account/api-keys.","type":"invalid_request_error","code":"invalid_api_key"}}`, key)
		case bytes.Contains(body, []byte(`"up-bad"`)):
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"error":{"message":"header Authorization: Bearer %s from %s is not allowed","type":"invalid_request_error","code":null}}`, key, r.Host)
		default:
			fmt.Fprintf(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"your key is %s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`, key)
		}
	}))
}

func echoYAML(base string) string {
	return hostileServer + `
providers:
  - {name: up, kind: openai, base_url: "` + base + `/v1", api_key: "` + upstreamKey + `"}
deployments:
  - {id: auth, model: up-auth, provider: up}
  - {id: bad, model: up-bad, provider: up}
  - {id: ok, model: up-ok, provider: up}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"]}
`
}

// Issue 15 reproduction: an upstream 401 "Incorrect API key provided:
// <key>" was relayed verbatim (as a 401 the client took for its own key),
// and the same text reached the audit and the log. Now the client gets 502
// upstream_auth_error with a fixed message, and the key is nowhere: not in
// any body, header, audit entry or log line; nor is the upstream address.
func TestUpstreamEchoingItsKeyNeverLeaks(t *testing.T) {
	up := echoUpstream()
	defer up.Close()
	g := startGateway(t, echoYAML(up.URL), up.URL)
	upHost := strings.TrimPrefix(up.URL, "http://")
	client := &http.Client{Timeout: 10 * time.Second}
	call := func(model, id string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", "http://"+g.addr+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer sk-test")
		req.Header.Set("X-Request-Id", id)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	noLeak := func(where, s string) {
		t.Helper()
		if strings.Contains(s, upstreamKey) || strings.Contains(s, "SECRET") {
			t.Errorf("%s leaks the upstream key: %s", where, s)
		}
		if strings.Contains(s, upHost) {
			t.Errorf("%s leaks the upstream address %s: %s", where, upHost, s)
		}
	}
	resp, body := call("up-auth", "echo-auth")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, `"upstream_auth_error"`) || !strings.Contains(body, "not your API key") {
		t.Fatalf("upstream 401: %d %s, want 502 upstream_auth_error with the fixed message", resp.StatusCode, body)
	}
	noLeak("401 body", body)
	resp, body = call("up-bad", "echo-bad")
	if resp.StatusCode != 400 {
		t.Fatalf("upstream 400: %d %s", resp.StatusCode, body)
	}
	noLeak("400 body", body)
	resp, body = call("up-ok", "echo-ok")
	if resp.StatusCode != 200 {
		t.Fatalf("upstream 200: %d %s", resp.StatusCode, body)
	}
	noLeak("200 body", body)
	var hdrs strings.Builder
	_ = resp.Header.Write(&hdrs)
	noLeak("200 headers", hdrs.String())
	for _, id := range []string{"echo-auth", "echo-bad", "echo-ok"} {
		req, _ := http.NewRequest("GET", "http://"+g.addr+"/admin/requests/"+id, nil)
		req.Header.Set("Authorization", "Bearer adm")
		aresp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		ab, _ := io.ReadAll(aresp.Body)
		aresp.Body.Close()
		if aresp.StatusCode != 200 {
			t.Fatalf("audit %s: %d %s", id, aresp.StatusCode, ab)
		}
		noLeak("audit "+id, string(ab))
	}
	noLeak("log", g.logs.String())
}

// Issue 15 reproduction: a 502 body showed "dial tcp 127.0.0.1:PORT:
// connect: connection refused", and so did the audit and the log.
func TestUpstreamAddressNeverLeaks(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // connection refused from now on
	g := startGateway(t, echoYAML(dead), dead)
	w := do(t, g.node.Handler(), "POST", "/v1/chat/completions", "sk-test", `{"model":"up-ok","messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", "dead-1")
	if w.Code != http.StatusBadGateway {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	for where, s := range map[string]string{
		"body":  w.Body.String(),
		"audit": do(t, g.node.Handler(), "GET", "/admin/requests/dead-1", "adm", "").Body.String(),
		"log":   g.logs.String(),
	} {
		if strings.Contains(s, "127.0.0.1") || strings.Contains(s, fmt.Sprint(port)) {
			t.Errorf("%s leaks the upstream address: %s", where, s)
		}
	}
	if !strings.Contains(w.Body.String(), "connection refused") {
		t.Errorf("the cause should still be told: %s", w.Body)
	}
}

// streamUpstream serves model "endless" as one SSE event that never ends
// (data: lines without the blank line), model "firehose" as a stream of
// valid chunks that never ends, and anything else as a short valid stream.
func streamUpstream() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		chunk := `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + strings.Repeat("x", 200) + `"}}]}`
		switch {
		case bytes.Contains(body, []byte(`"endless"`)):
			line := "data: " + strings.Repeat("y", 64<<10) + "\n"
			for i := 0; i < 400 && r.Context().Err() == nil; i++ { // 25 MiB at most
				if _, err := io.WriteString(w, line); err != nil {
					return
				}
			}
		case bytes.Contains(body, []byte(`"firehose"`)):
			for i := 0; i < 1_000_000 && r.Context().Err() == nil; i++ { // bounded: ~250 MB
				if _, err := io.WriteString(w, "data: "+chunk+"\n\n"); err != nil {
					return
				}
				if i%64 == 0 {
					fl.Flush()
				}
			}
		default:
			fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", chunk)
		}
	}))
}

func streamYAML(extra string) string {
	return hostileServer + `
providers:
  - {name: up, kind: openai, base_url: "${UPSTREAM}/v1", api_key: k}
deployments:
  - {id: endless-a, model: m, provider: up, upstream_model: endless}
  - {id: fine-b, model: fb, provider: up, upstream_model: fine}
  - {id: hose, model: hose, provider: up, upstream_model: firehose}
routing:
  fallbacks: [{primary: m, reason: general, models: [fb]}]
teams:
  - {name: t, keys: ["sk-test"], models: ["*"], max_parallel: 1}
` + extra
}

// Issue 15 reproduction: an upstream event without end grew without limit
// (64 MiB seen). Now the event is capped, the attempt is a server_error,
// and as nothing was sent yet the stream fails over to the fallback, which
// says X-Switchyard-Degraded: true (a stream used to lack it).
func TestEndlessUpstreamEventFailsOver(t *testing.T) {
	up := streamUpstream()
	defer up.Close()
	g := startGateway(t, streamYAML(""), up.URL)
	before := heapInUse()
	w := do(t, g.node.Handler(), "POST", "/v1/chat/completions", "sk-test",
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", "endless-1")
	if w.Code != 200 || w.Header().Get("X-Switchyard-Deployment") != "fine-b" {
		t.Fatalf("status %d deployment %q: %.300s", w.Code, w.Header().Get("X-Switchyard-Deployment"), w.Body)
	}
	if w.Header().Get("X-Switchyard-Degraded") != "true" {
		t.Errorf("a stream served by a fallback must say X-Switchyard-Degraded: true; headers %v", w.Header())
	}
	if !strings.Contains(w.Body.String(), "[DONE]") {
		t.Errorf("fallback stream incomplete: %.300s", w.Body)
	}
	audit := do(t, g.node.Handler(), "GET", "/admin/requests/endless-1", "adm", "").Body.String()
	if !strings.Contains(audit, `"server_error"`) || !strings.Contains(audit, "exceeds 8 MiB") {
		t.Errorf("the endless event's attempt should be a server_error: %s", audit)
	}
	if grew := int64(heapInUse()) - int64(before); grew > 24<<20 {
		t.Errorf("an endless event left the heap %d bytes larger", grew)
	}
}

// Issue 15 reproduction: a client that never reads a stream held its
// handler, connection, slot and upstream call past request_timeout. Now the
// write deadline cuts it off after write_timeout without progress: the
// deployment's in-flight count and the team's slot (max_parallel: 1) are
// back at once.
func TestStalledStreamClientReleased(t *testing.T) {
	up := streamUpstream()
	defer up.Close()
	g := startGateway(t, streamYAML(""), up.URL)
	body := `{"model":"hose","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	c := g.rawRequest(t, "/v1/chat/completions", "sk-test", len(body), body)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10) // fill up quickly: we never read
	}
	st := g.node.Router.State("hose")
	deadline := time.Now().Add(10 * time.Second)
	for st.InFlight() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st.InFlight() != 1 {
		t.Fatal("the stream never started")
	}
	for st.InFlight() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := st.InFlight(); n != 0 {
		t.Fatalf("in-flight still %d: a stalled client holds the upstream call", n)
	}
	// the team's only slot is free again: released by the handler's finish,
	// which runs just after the upstream call ends
	team := g.node.Catalog.Load().Team("t")
	for time.Now().Before(deadline) {
		u, err := g.node.Edge.Usage(context.Background(), team)
		if err == nil && u.InFlight == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	w := do(t, g.node.Handler(), "POST", "/v1/chat/completions", "sk-test", `{"model":"fb","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if w.Code != 200 {
		t.Fatalf("after the stalled client: %d %s (its slot was not released)", w.Code, w.Body)
	}
}

// A 429 that no retry can fix soon (budget spent) says x-should-retry:
// false; a short rate-limit wait does not.
func TestShouldRetryHeader(t *testing.T) {
	n := newTestNode(t, `
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 8}}
deployments:
  - {id: d1, model: m, provider: sim, price: {input: 100, output: 100}}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"], budget: {usd: 0.002, period: 720h}}
  - {name: r, keys: ["sk-rpm"], models: ["*"], rpm: 1}
`)
	// the first fits its reservation (about 15 tokens at $100/M); the
	// second's does not fit what the first left
	chat := `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	if w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, chat); w.Code != 200 {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	w := do(t, n.Handler(), "POST", "/v1/chat/completions", testKey, chat)
	if w.Code != 429 || w.Header().Get("X-Should-Retry") != "false" {
		t.Fatalf("budget spent: %d x-should-retry=%q %s", w.Code, w.Header().Get("X-Should-Retry"), w.Body)
	}
	do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-rpm", chat)
	w = do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-rpm", chat)
	if w.Code != 429 || w.Header().Get("X-Should-Retry") != "" {
		t.Fatalf("rpm 1, wait under a minute: %d x-should-retry=%q", w.Code, w.Header().Get("X-Should-Retry"))
	}
}

// Every error body is valid JSON and valid UTF-8, even when it echoes a
// header value holding invalid bytes.
func TestErrorBodiesValidUTF8(t *testing.T) {
	n := newTestNode(t, simYAML)
	for _, format := range []string{"/v1/chat/completions", "/v1/messages"} {
		w := do(t, n.Handler(), "POST", format, testKey, `{"model":"normal","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
			"X-Switchyard-Tier", "h\xffard\xc3")
		if w.Code != 400 || !utf8.Valid(w.Body.Bytes()) || !jsonOK(w.Body.Bytes()) {
			t.Errorf("%s: %d %q is not a valid JSON/UTF-8 400", format, w.Code, w.Body)
		}
	}
}

func jsonOK(b []byte) bool { return json.Valid(b) }

// The write deadline is renewed before every write: a stream the client
// reads is never cut, however much longer than write_timeout it lasts.
func TestSlowStreamLongerThanWriteTimeout(t *testing.T) {
	g := startGateway(t, hostileServer+`
providers:
  - {name: slow, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 25, output_tokens: 20}}
deployments:
  - {id: s1, model: m, provider: slow}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"]}
`, "")
	req, _ := http.NewRequest("POST", "http://"+g.addr+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-test")
	start := time.Now()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(b), "[DONE]") {
		t.Fatalf("a read stream was cut: %v %q", err, b)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Skip("stream finished within write_timeout; nothing to show") // never expected: 20 tokens at 25/s
	}
}

// Issue 15 reproduction: admin.key written as sha256:<hex> became the
// literal secret. Now it is the digest of the admin key, like team keys.
func TestAdminKeyAsDigest(t *testing.T) {
	sum := sha256.Sum256([]byte("adm-secret"))
	digest := "sha256:" + strings.ToUpper(hex.EncodeToString(sum[:]))
	n := newTestNode(t, simYAML+"admin: {key: \""+digest+"\"}\n")
	if w := do(t, n.Handler(), "GET", "/admin/health", "adm-secret", ""); w.Code != 200 {
		t.Fatalf("the clear admin key behind a sha256: digest: %d %s", w.Code, w.Body)
	}
	if w := do(t, n.Handler(), "GET", "/admin/health", digest, ""); w.Code != 401 {
		t.Fatalf("the digest itself must not be the admin key: %d", w.Code)
	}
}

// Issue 30 reproduction (finding 3): request_timeout did not bound writes.
// A client that never reads held the handler, the upstream call and the
// team's only slot until write_timeout (30 s here), however short the
// request timeout. Now the write deadline never passes the request's, so
// both a stalled stream and a stalled sync body are cut at request_timeout
// (1 s), long before write_timeout.
func TestRequestTimeoutCutsBlockedWrites(t *testing.T) {
	big := `{"id":"c","object":"chat.completion","created":1,"model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("z", 8<<20) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			chunk := "data: " + `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + strings.Repeat("x", 1000) + `"}}]}` + "\n\n"
			for i := 0; i < 200_000 && r.Context().Err() == nil; i++ { // bounded
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, big)
	}))
	defer up.Close()
	g := startGateway(t, `
server: {write_timeout: 30s, request_timeout: 1s, upstream_timeout: 5s}
providers:
  - {name: up, kind: openai, base_url: "${UPSTREAM}/v1", api_key: k}
deployments:
  - {id: d, model: m, provider: up}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"], max_parallel: 1}
`, up.URL)
	st := g.node.Router.State("d")
	team := g.node.Catalog.Load().Team("t")
	for _, stream := range []bool{true, false} {
		body := fmt.Sprintf(`{"model":"m","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream)
		c := g.rawRequest(t, "/v1/chat/completions", "sk-test", len(body), body)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4 << 10) // we never read
		}
		start := time.Now()
		deadline := start.Add(10 * time.Second) // well under write_timeout
		for st.InFlight() == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		for time.Now().Before(deadline) {
			u, err := g.node.Edge.Usage(context.Background(), team)
			if st.InFlight() == 0 && err == nil && u.InFlight == 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		u, _ := g.node.Edge.Usage(context.Background(), team)
		if st.InFlight() != 0 || u.InFlight != 0 {
			t.Fatalf("stream=%v: after %v the upstream call (%d) or the team's slot (%d) is still held by a client that never reads",
				stream, time.Since(start), st.InFlight(), u.InFlight)
		}
		c.Close()
	}
}

// Issue 30 reproduction: an upstream 401 quoting a key that is not the
// provider's own ("Incorrect API key provided: sk-upstream-SECRET123...")
// reached the audit entry verbatim. Now anything shaped like a credential
// is masked after its first six characters in what the client, the audit
// and the log see, also when the upstream JSON-escaped it.
func TestUpstreamQuotingForeignKeysMasked(t *testing.T) {
	foreign := "sk-upstream-SECRET123abcdefgh"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if bytes.Contains(body, []byte("auth")) {
			w.WriteHeader(401)
			fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s.","type":"invalid_request_error","code":"invalid_api_key"}}`, foreign)
			return
		}
		w.WriteHeader(400)
		// escaped the way a JSON encoder may: sk\u002d..., and an AWS id and a Bearer token beside it
		fmt.Fprint(w, `{"error":{"message":"bad: sk\u002dupstream\u002dSECRET123abcdefgh AKIAIOSFODNN7SECRET1 Bearer SECRETtoken-0123456789","type":"invalid_request_error"}}`)
	}))
	defer up.Close()
	g := startGateway(t, hostileServer+`
providers:
  - {name: up, kind: openai, base_url: "${UPSTREAM}/v1", api_key: sk-configured-0123456789abcdef}
deployments:
  - {id: a, model: up-auth, provider: up, upstream_model: auth}
  - {id: b, model: up-bad, provider: up, upstream_model: bad}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"]}
`, up.URL)
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(method, path, key, body, id string) string {
		req, _ := http.NewRequest(method, "http://"+g.addr+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		if id != "" {
			req.Header.Set("X-Request-Id", id)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b)
	}
	seen := map[string]string{}
	for _, m := range []string{"up-auth", "up-bad"} {
		seen["client "+m] = get("POST", "/v1/chat/completions", "sk-test", `{"model":"`+m+`","messages":[{"role":"user","content":"hi"}]}`, "q-"+m)
		seen["audit "+m] = get("GET", "/admin/requests/q-"+m, "adm", "", "")
	}
	seen["log"] = g.logs.String()
	if !strings.Contains(seen["audit up-auth"], "sk-ups") {
		t.Errorf("the audit should keep the key's first six characters to tell which it was: %s", seen["audit up-auth"])
	}
	for where, s := range seen {
		for _, leak := range []string{"SECRET", `\u002dSECRET`} {
			if strings.Contains(s, leak) {
				t.Errorf("%s holds %q: %s", where, leak, s)
			}
		}
	}
}
