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

	"switchyard/cache"
)

// heldStream is an upstream that streams one chunk, then holds its stream
// open until release is closed (or the call ends), then finishes with
// usage 5 + 2: a coalescing leader kept mid-stream. calls counts its calls.
func heldStream(t *testing.T, calls *atomic.Int64) (up *httptest.Server, release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	up = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","content":"first "}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":"second"},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`+"\n\ndata: [DONE]\n\n")
	}))
	return up, release
}

// A streaming follower that coalesced onto a leader's answer is accounted
// like a hit (SPEC 18): its audit entry says cached with the tokens and the
// cost it saved, and the stats count them. The sync follower was; the
// streaming one was counted with nothing saved.
func TestHostile4StreamFollowerAccountedLikeAHit(t *testing.T) {
	var calls atomic.Int64
	up, release := heldStream(t, &calls)
	defer up.Close()
	n := cacheNode(t, up.URL, ", price: {input: 1000, output: 1000}", `  - {name: a, keys: ["sk-a"], models: ["*"]}`)
	gw := httptest.NewServer(n.Handler())
	defer gw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body := `{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"herd"}]}`
	// open sends the request and reads its stream up to the first event:
	// then the leader is mid-stream, or the follower attached
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
	follower, fb := open("follower")
	close(release)
	for _, r := range []struct {
		resp *http.Response
		br   *bufio.Reader
	}{{leader, lb}, {follower, fb}} {
		rest, err := io.ReadAll(r.br)
		r.resp.Body.Close()
		if err != nil || !strings.Contains(string(rest), "[DONE]") {
			t.Fatalf("stream incomplete: %v %s", err, rest)
		}
	}
	if calls.Load() != 1 || follower.Header.Get("X-Switchyard-Cache") != "coalesced" {
		t.Fatalf("calls=%d follower cache=%q", calls.Load(), follower.Header.Get("X-Switchyard-Cache"))
	}
	var es []auditEntryView
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		got, _ := n.Audit.Lookup(ctx, "follower")
		es = es[:0]
		for _, e := range got {
			es = append(es, auditEntryView{e.Cached, e.SavedUSD, e.PromptTokens, e.CompletionTokens, e.RoutedModel})
		}
		if len(es) == 1 {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Millisecond):
		}
	}
	if len(es) != 1 || !es[0].cached || es[0].saved <= 0 || es[0].prompt != 5 || es[0].completion != 2 || es[0].routed != "m" {
		t.Fatalf("streaming follower's audit: %+v", es)
	}
	all, _, _ := cache.Totals(n.Server.cacheStats.total.Snapshot())
	if all.Coalesced != 1 || all.SavedTokens != 7 || all.SavedUSD <= 0 {
		t.Fatalf("stats: %+v", all)
	}
}

type auditEntryView struct {
	cached             bool
	saved              float64
	prompt, completion int
	routed             string
}
