package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A streaming follower of a streaming leader whose answer is complete and
// successful but larger than max_entry_bytes (so not stored, SPEC 18) was
// handed every delta of the answer: it ends its stream as the leader does,
// with the finish and [DONE], accounted like a hit, not with an error event
// after the whole content ("the answer this request followed ended before
// it was complete"). Only storing is refused for such an answer, not
// sharing it (SPEC 18: "larger answers are not stored").
func TestHostile5StreamFollowerOfAnswerTooLargeToStore(t *testing.T) {
	var calls atomic.Int64
	release := make(chan struct{})
	long := strings.Repeat("x", 300) // the answer's text outgrows max_entry_bytes
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","content":"first "}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":"`+long+`"},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":80,"total_tokens":85}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	yml := strings.Replace(cacheYAML(up.URL, ", price: {input: 1000, output: 1000}", `  - {name: a, keys: ["sk-a"], models: ["*"]}`),
		"cache: {enabled: true}", "cache: {enabled: true, max_entry_bytes: 200}", 1)
	n := newTestNode(t, yml)
	gw := httptest.NewServer(n.Handler())
	defer gw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body := `{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"too large"}]}`
	open := func(id string) (*http.Response, *bufio.Reader) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "POST", gw.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-a")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: stream ended before its first event: %v", id, err)
			}
			if strings.Contains(line, "first ") {
				return resp, br
			}
		}
	}
	leader, lb := open("leader")
	follower, fb := open("follower") // attached: it has the leader's first delta
	close(release)
	for _, r := range []struct {
		name string
		resp *http.Response
		br   *bufio.Reader
	}{{"leader", leader, lb}, {"follower", follower, fb}} {
		rest, err := io.ReadAll(r.br)
		r.resp.Body.Close()
		s := string(rest)
		if err != nil || !strings.Contains(s, long) || !strings.Contains(s, `"finish_reason":"stop"`) ||
			!strings.HasSuffix(s, "data: [DONE]\n\n") || strings.Contains(s, `"error"`) {
			t.Fatalf("%s: the stream did not end as a complete answer: %v\n%s", r.name, err, s)
		}
	}
	if calls.Load() != 1 || follower.Header.Get("X-Switchyard-Cache") != "coalesced" {
		t.Fatalf("calls=%d follower cache=%q", calls.Load(), follower.Header.Get("X-Switchyard-Cache"))
	}
	// and nothing was stored: the next identical request calls the upstream
	w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-a", strings.Replace(body, `"stream":true,`, "", 1))
	if w.Header().Get("X-Switchyard-Cache") != "miss" {
		t.Fatalf("an answer over max_entry_bytes was stored: cache=%q", w.Header().Get("X-Switchyard-Cache"))
	}
}
