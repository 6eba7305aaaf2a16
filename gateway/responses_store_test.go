package gateway

// The response store's bounds seen from the client (SPEC 10.1, 14; issue 30
// findings 1, 2 and 10): expansion is counted before it is built, stored
// turns are linked rather than copied, and item ids cannot collide.

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// postResponse sends a Responses body and returns the response's id and
// its first output item's id, failing the test on anything but 200.
func postResponse(t *testing.T, h http.Handler, body string) (id, item string) {
	t.Helper()
	w := do(t, h, "POST", "/v1/responses", testKey, body)
	if w.Code != 200 {
		t.Fatalf("%.80s: %d %.300s", body, w.Code, w.Body)
	}
	var r struct {
		ID     string `json:"id"`
		Output []struct {
			ID string `json:"id"`
		} `json:"output"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil || r.ID == "" || len(r.Output) == 0 {
		t.Fatalf("response: %v %.300s", err, w.Body)
	}
	return r.ID, r.Output[0].ID
}

// bigUpstream answers every chat completion with one message of two parts
// (content and refusal) of half bytes each: a stored output item of
// 2*half bytes whose text is joined from two parts when expanded.
func bigUpstream(t *testing.T, half int) string {
	t.Helper()
	content, _ := json.Marshal(strings.Repeat("a", half))
	refusal, _ := json.Marshal(strings.Repeat("b", half))
	body := `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` +
		string(content) + `,"refusal":` + string(refusal) + `},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Issue 30, finding 1: 2,000 references to a stored 400 KB item in a body
// under 200 KB are refused with 413 before the expansion is built; the
// request allocates less than a small multiple of server.max_body_bytes
// (before the fix it built ~800 MB of joined text, then answered 400).
func TestResponsesReferencesCountedBeforeExpansion(t *testing.T) {
	const maxBody = 10 << 20 // the default server.max_body_bytes
	n := newTestNode(t, strings.ReplaceAll(respYAML, "${UPSTREAM}", bigUpstream(t, 200<<10)))
	h := n.Handler()
	_, item := postResponse(t, h, `{"model":"oai","input":"store a big item"}`)
	ref := `{"type":"item_reference","id":"` + item + `"},`
	body := `{"model":"oai","input":[` + strings.Repeat(ref, 1999) + strings.TrimSuffix(ref, ",") + `]}`
	if len(body) > 200<<10 {
		t.Fatalf("body %d bytes", len(body))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := do(t, h, "POST", "/v1/responses", testKey, body)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("the refused request allocated %d KB", alloc>>10)
	if alloc > 4*maxBody {
		t.Errorf("the refused request allocated %d MB, bound %d MB (4 x max_body_bytes)", alloc>>20, 4*maxBody>>20)
	}
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "max_body_bytes") {
		t.Fatalf("want 413 naming server.max_body_bytes, got %d %.300s", w.Code, w.Body)
	}
	var e struct {
		Error struct{ Message, Type, Param string } `json:"error"`
	}
	if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error.Type != "invalid_request_error" || e.Error.Param == "" {
		t.Fatalf("not the OpenAI error shape: %s", w.Body)
	}
	// a few references that fit still expand
	if id, _ := postResponse(t, h, `{"model":"oai","input":[`+strings.Repeat(ref, 3)+`{"role":"user","content":"and?"}]}`); id == "" {
		t.Fatal("no id")
	}
}

// The same bound for previous_response_id: a chain whose stored turns take
// the request past server.max_body_bytes is a 413, counted while walking.
func TestResponsesChainCountedBeforeExpansion(t *testing.T) {
	yml := "server:\n  max_body_bytes: 65536\n" + strings.ReplaceAll(respYAML, "${UPSTREAM}", "http://127.0.0.1:1")
	n := newTestNode(t, yml)
	h := n.Handler()
	prev := ""
	for i := range 3 {
		body := `{"model":"sim","input":"` + strings.Repeat("x", 25<<10) + `"`
		if prev != "" {
			body += `,"previous_response_id":"` + prev + `"`
		}
		if i < 2 {
			prev, _ = postResponse(t, h, body+`}`)
			continue
		}
		w := do(t, h, "POST", "/v1/responses", testKey, body+`}`)
		if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "max_body_bytes") || !strings.Contains(w.Body.String(), "previous_response_id") {
			t.Fatalf("want 413 naming server.max_body_bytes, got %d %.300s", w.Code, w.Body)
		}
	}
}

// Issue 30, finding 2: one response with 9,000 small items, then 100
// follow-ups, each continuing the last. Stored turns link to the turn
// before and never copy the conversation, so the follow-ups leave the heap
// within 32 MB (copies held ~140 MB: 9,000 items a turn).
func TestResponsesFollowUpsDoNotCopy(t *testing.T) {
	n, _, _ := respNode(t)
	h := n.Handler()
	var sb strings.Builder
	sb.WriteString(`{"model":"sim","input":[`)
	for i := range 9000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"role":"user","content":"m` + strconv.Itoa(i) + `"}`)
	}
	sb.WriteString(`]}`)
	prev, _ := postResponse(t, h, sb.String())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 100 {
		prev, _ = postResponse(t, h, `{"model":"sim","input":"more","previous_response_id":"`+prev+`"}`)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("heap in use grew %d KB over 100 follow-ups", grew>>10)
	if grew > 32<<20 {
		t.Fatalf("100 follow-ups grew the heap in use by %d MB, bound 32 MB", grew>>20)
	}
	// the whole conversation still reaches the upstream view
	w := do(t, h, "POST", "/v1/responses", testKey, `{"model":"sim","input":"last","previous_response_id":"`+prev+`"}`)
	if w.Code != 200 {
		t.Fatalf("%d %.300s", w.Code, w.Body)
	}
}

// Issue 30, finding 10: an item id a client puts on an input item (here
// the id of an earlier output, resent with other text) neither shadows the
// stored item nor makes it belong to the later response, so deleting that
// response leaves the item; a client's own ids are not stored items.
func TestResponsesItemIDsDoNotCollide(t *testing.T) {
	_, srv, up := respNode(t)
	h := srv.Config.Handler
	_, item := postResponse(t, h, `{"model":"oai","input":"first question"}`)
	forger, _ := postResponse(t, h, `{"model":"oai","input":[{"type":"message","id":"`+item+`","role":"assistant","content":"forged"},{"role":"user","content":"next"}]}`)
	ref := `{"model":"oai","input":[{"type":"item_reference","id":"` + item + `"},{"role":"user","content":"q"}]}`
	postResponse(t, h, ref)
	if sent, _ := up.last(); !strings.Contains(sent, "sim token 1 sim token 2") || strings.Contains(sent, "forged") {
		t.Fatalf("the reference resolved to a client's item with the same id: %s", sent)
	}
	if w := do(t, h, "DELETE", "/v1/responses/"+forger, testKey, ""); w.Code != 200 {
		t.Fatalf("delete: %d %s", w.Code, w.Body)
	}
	w := do(t, h, "POST", "/v1/responses", testKey, ref)
	if sent, _ := up.last(); w.Code != 200 || !strings.Contains(sent, "sim token 1 sim token 2") {
		t.Fatalf("deleting a response that only carried the id removed the item: %d %.200s", w.Code, w.Body)
	}
	// a client-chosen id is never a stored item (two responses may use it)
	postResponse(t, h, `{"model":"oai","input":[{"type":"message","id":"msg_mine","role":"user","content":"a"}]}`)
	postResponse(t, h, `{"model":"oai","input":[{"type":"message","id":"msg_mine","role":"user","content":"b"}]}`)
	w = do(t, h, "POST", "/v1/responses", testKey, `{"model":"oai","input":[{"type":"item_reference","id":"msg_mine"}]}`)
	if w.Code != 404 || !strings.Contains(w.Body.String(), "msg_mine") {
		t.Fatalf("a client-chosen id resolved: %d %.200s", w.Code, w.Body)
	}
}

// A conversation whose earlier turn is gone (deleted here; expired or
// evicted alike) is a 404 naming that turn: turns are linked, not copied.
func TestResponsesEarlierTurnGone(t *testing.T) {
	n, _, _ := respNode(t)
	h := n.Handler()
	r1, _ := postResponse(t, h, `{"model":"sim","input":"one"}`)
	r2, _ := postResponse(t, h, `{"model":"sim","input":"two","previous_response_id":"`+r1+`"}`)
	r3, _ := postResponse(t, h, `{"model":"sim","input":"three","previous_response_id":"`+r2+`"}`)
	if w := do(t, h, "DELETE", "/v1/responses/"+r2, testKey, ""); w.Code != 200 {
		t.Fatalf("delete: %d %s", w.Code, w.Body)
	}
	if w := do(t, h, "GET", "/v1/responses/"+r3, testKey, ""); w.Code != 200 {
		t.Fatalf("deleting a turn must leave the later one: %d %s", w.Code, w.Body)
	}
	w := do(t, h, "POST", "/v1/responses", testKey, `{"model":"sim","input":"four","previous_response_id":"`+r3+`"}`)
	if w.Code != 404 || !strings.Contains(w.Body.String(), r2) || !strings.Contains(w.Body.String(), `"param":"previous_response_id"`) {
		t.Fatalf("want 404 naming the missing turn %s: %d %.300s", r2, w.Code, w.Body)
	}
}

// A follow-up's expansion is request body the node holds: it takes its
// bytes from server.max_inflight_body_bytes like a body's growth, so small
// follow-ups of a large conversation cannot each hold up to the body limit
// beyond the node's budget (SPEC 14). With the budget held by other
// requests the follow-up is a 503 body_budget_exhausted; once they end it
// is served. Before, the expansion was never counted (200 either way).
func TestResponsesExpansionTakesTheBodyBudget(t *testing.T) {
	yml := "server:\n  max_body_bytes: 65536\n  max_inflight_body_bytes: 131072\n" + strings.ReplaceAll(respYAML, "${UPSTREAM}", "http://127.0.0.1:1")
	n := newTestNode(t, yml)
	h := n.Handler()
	prev, _ := postResponse(t, h, `{"model":"sim","input":"`+strings.Repeat("x", 50<<10)+`"}`)
	follow := `{"model":"sim","input":"and?","previous_response_id":"` + prev + `"}`
	const held = 90 << 10 // other requests' bodies
	if !n.Server.bodies.take(held, 1<<40) {
		t.Fatal("take")
	}
	w := do(t, h, "POST", "/v1/responses", testKey, follow)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "body_budget_exhausted") {
		t.Fatalf("with the budget held: want 503 body_budget_exhausted, got %d %.300s", w.Code, w.Body)
	}
	if got := n.Server.bodies.held.Load(); got != held {
		t.Fatalf("the refused follow-up left %d bytes of the budget held, want the others' %d", got, held)
	}
	n.Server.bodies.held.Add(-held)
	if w := do(t, h, "POST", "/v1/responses", testKey, follow); w.Code != http.StatusOK {
		t.Fatalf("with the budget free: %d %.300s", w.Code, w.Body)
	}
	if got := n.Server.bodies.held.Load(); got != 0 {
		t.Fatalf("%d bytes of the budget held after the follow-up ended", got)
	}
}
