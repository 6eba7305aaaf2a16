package gateway

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestBodyReadEndsAtRequestDeadline: a body that trickles in is cut at the
// request's deadline when server.request_timeout is shorter than
// server.read_timeout (SPEC 14: the request timeout bounds the whole
// request): the client gets its 408 then, naming request_timeout, where the
// handler waited for read_timeout (30 s here) before.
func TestBodyReadEndsAtRequestDeadline(t *testing.T) {
	g := startGateway(t, `
server: {request_timeout: 300ms, read_timeout: 30s}
providers:
  - {name: up, kind: openai, base_url: "${UPSTREAM}/v1", api_key: k}
deployments:
  - {id: d, model: m, provider: up}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"]}
`, "http://127.0.0.1:9")
	conn, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// the headers and 10 of the 100 bytes announced; the rest never comes
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-test\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\":")
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second)) // the bound of this test, far past 300 ms
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer within 5 s of a stalled body (request_timeout 300ms): %v", err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(b.String(), "request_timeout") {
		t.Fatalf("%d %s, want 408 naming server.request_timeout", resp.StatusCode, b.String())
	}
}
