package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"switchyard/config"
	"switchyard/internal/redistest"
	"switchyard/providers"
	resstore "switchyard/responses"
)

// recordingUpstream is switchyard mockllm behind a recorder of the bodies
// it receives, so a test can assert what reached the upstream.
type recordingUpstream struct {
	h      http.Handler
	mu     sync.Mutex
	bodies []string
}

func newRecordingUpstream(t *testing.T) (*recordingUpstream, *httptest.Server) {
	u := &recordingUpstream{h: providers.MockHandler(config.Simulate{OutputTokens: 6}, 1)}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	return u, srv
}

func (u *recordingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, string(b))
	u.mu.Unlock()
	r.Body = io.NopCloser(strings.NewReader(string(b)))
	u.h.ServeHTTP(w, r)
}

func (u *recordingUpstream) last() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.bodies) == 0 {
		return ""
	}
	return u.bodies[len(u.bodies)-1]
}

const respClusterYAML = `
server: {node_id: "${NODE}"}
redis: {url: "${REDIS}", timeout: 500ms, key_prefix: "syresp:"}
providers:
  - {name: up, kind: openai, base_url: "${UPSTREAM}/v1"}
deployments:
  - {id: r1, model: m, provider: up}
  - {id: r2, model: m, provider: up}
  - {id: r3, model: m, provider: up}
teams:
  - {name: a, keys: ["sk-a"], models: ["*"]}
  - {name: b, keys: ["sk-b"], models: ["*"]}
`

// TestResponsesAcrossReplicas: turn 1 on one replica, turn 2 with
// previous_response_id on the other; the upstream sees turn 1 in turn 2,
// the conversation keeps its deployment (its session is the first
// response's), and another team cannot continue it.
func TestResponsesAcrossReplicas(t *testing.T) {
	rs := redistest.Start(t)
	up, upSrv := newRecordingUpstream(t)
	var nodes []*Node
	var urls []string
	for i := range 2 {
		yml := strings.NewReplacer("${REDIS}", rs.URL(), "${NODE}", fmt.Sprintf("n%d", i+1), "${UPSTREAM}", upSrv.URL).Replace(respClusterYAML)
		cfg, err := config.Load([]byte(yml), nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DataDir = ""
		n, err := Assemble(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: int64(i + 7)})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(n.Handler())
		t.Cleanup(func() {
			srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = n.Close(ctx)
		})
		nodes, urls = append(nodes, n), append(urls, srv.URL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var served [2]string
	var hdr0, hdr1 = new(httptestHeader), new(httptestHeader)
	c0 := openai.NewClient(option.WithBaseURL(urls[0]+"/v1/"), option.WithAPIKey("sk-a"), option.WithMaxRetries(0), option.WithMiddleware(hdr0.capture))
	c1 := openai.NewClient(option.WithBaseURL(urls[1]+"/v1/"), option.WithAPIKey("sk-a"), option.WithMaxRetries(0), option.WithMiddleware(hdr1.capture))
	r1, err := c0.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("turn one")}})
	if err != nil {
		t.Fatal(err)
	}
	served[0] = hdr0.get("X-Switchyard-Deployment")
	// storing (and the deployment pin) happen after the response; the next
	// turn comes later than that: wait until node 1 has written them
	if err := nodes[0].Responses.(*resstore.Redis).Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c := rs.Client()
	waitUntilTrue(t, "deployment pin in Redis", func() bool {
		keys, _ := c.Keys(context.Background(), "syresp:{team:a}:pd:*").Result()
		return len(keys) == 1
	})
	st := c1.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "m", PreviousResponseID: openai.String(r1.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("turn two")}})
	var final responses.Response
	for st.Next() {
		if ev := st.Current(); ev.Type == "response.completed" {
			final = ev.Response
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	served[1] = hdr1.get("X-Switchyard-Deployment")
	body := up.last()
	if !strings.Contains(body, "turn one") || !strings.Contains(body, "sim token 1 sim token 2") || !strings.Contains(body, "turn two") {
		t.Fatalf("turn 2 on the other replica did not carry turn 1 upstream: %s", body)
	}
	if served[0] == "" || served[0] != served[1] {
		t.Fatalf("the conversation moved from %s to %s across replicas", served[0], served[1])
	}
	if final.ID == "" || final.PreviousResponseID != r1.ID {
		t.Fatalf("final %+v", final)
	}
	// turn 3 back on replica 1 continues from turn 2 (stored by replica 2)
	if err := nodes[1].Responses.(*resstore.Redis).Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c0.Responses.New(ctx, responses.ResponseNewParams{Model: "m", PreviousResponseID: openai.String(final.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("turn three")}}); err != nil {
		t.Fatal(err)
	}
	body = up.last()
	if i1, i2, i3 := strings.Index(body, "turn one"), strings.Index(body, "turn two"), strings.Index(body, "turn three"); i1 < 0 || i1 > i2 || i2 > i3 {
		t.Fatalf("turns out of order upstream: %s", body)
	}
	// another team's previous_response_id is 404 on every replica
	cb := openai.NewClient(option.WithBaseURL(urls[1]+"/v1/"), option.WithAPIKey("sk-b"), option.WithMaxRetries(0))
	var apiErr *openai.Error
	_, err = cb.Responses.New(ctx, responses.ResponseNewParams{Model: "m", PreviousResponseID: openai.String(r1.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("steal")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("another team: %v", err)
	}
}

// httptestHeader records one response header through an SDK middleware.
type httptestHeader struct{ h map[string]string }

func (c *httptestHeader) capture(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	resp, err := next(req)
	if err == nil {
		c.h = map[string]string{"X-Switchyard-Deployment": resp.Header.Get("X-Switchyard-Deployment")}
	}
	return resp, err
}

func (c *httptestHeader) get(k string) string { return c.h[k] }
