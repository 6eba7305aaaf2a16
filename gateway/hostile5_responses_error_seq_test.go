package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// SPEC 10.1: every event of a Responses stream carries an increasing
// sequence_number, the error event that ends a stream failing after its
// start included. OpenAI API reference, Responses > Streaming events >
// "error" (type, code, message, param, sequence_number: "The sequence
// number of this event"). The gateway wrote that event with
// "sequence_number":0 whatever it followed, so a client ordering or
// de-duplicating by sequence_number took it for the stream's first event.
func TestHostile5ResponsesErrorEventContinuesSequence(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		// two content chunks, then the upstream's own error event: the
		// stream fails after its first bytes reached the client
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":"lo"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		fmt.Fprint(w, `data: {"error":{"message":"the upstream broke","type":"server_error","code":"boom"}}`+"\n\n")
	}))
	defer up.Close()
	for _, tc := range []struct {
		name string
		node func(t *testing.T) *Node
	}{
		{"upstream error mid-stream", func(t *testing.T) *Node {
			return newTestNode(t, `
providers:
  - {name: oai, kind: openai, base_url: "`+up.URL+`/v1", api_key: up-key}
deployments:
  - {id: d-oai, model: m, provider: oai}
teams:
  - {name: t, keys: ["sk-test"], models: ["*"]}
`)
		}},
		{"gateway panic mid-stream", func(t *testing.T) *Node {
			n := newTestNode(t, panicYAML)
			withPanicAdapter(n, true)
			return n
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, tc.node(t).Handler(), "POST", "/v1/responses", testKey, `{"model":"m","stream":true,"input":"hi"}`)
			if w.Code != 200 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			var types []string
			last := int64(-1)
			for _, frame := range strings.Split(w.Body.String(), "\n\n") {
				_, data, ok := strings.Cut(frame, "data: ")
				if !ok {
					continue
				}
				var ev struct {
					Type string `json:"type"`
					Seq  *int64 `json:"sequence_number"`
				}
				if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Seq == nil {
					t.Fatalf("event without a sequence_number: %v %s", err, data)
				}
				types = append(types, ev.Type)
				if *ev.Seq != last+1 {
					t.Fatalf("%s has sequence_number %d after %d; stream:\n%s", ev.Type, *ev.Seq, last, w.Body)
				}
				last = *ev.Seq
			}
			if len(types) < 3 || types[len(types)-1] != "error" {
				t.Fatalf("the stream did not end with its error event after others: %v\n%s", types, w.Body)
			}
		})
	}
}
