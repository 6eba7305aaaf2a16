package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/redis/go-redis/v9"

	"switchyard/config"
	respstore "switchyard/responses"
)

// inputItemsBody is a request whose input holds every item kind the
// gateway stores: messages of each role (string and part content, an
// image), a function call with the client's own id, its output.
const inputItemsBody = `{"model":"sim","instructions":"Be brief.","input":[
 {"role":"developer","content":"Answer in French."},
 {"role":"user","content":[{"type":"input_text","text":"weather?"},{"type":"input_image","image_url":"https://x/y.png"}]},
 {"type":"function_call","id":"fc_client_1","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
 {"type":"function_call_output","call_id":"call_1","output":"sunny"},
 {"role":"assistant","content":"Il fait beau."},
 {"role":"user","content":"thanks"}]}`

// inputItemsNodes is two replicas sharing one Redis response store, each
// with its own local copy (SPEC 10.1: a follow-up on any replica finds it).
func inputItemsNodes(t *testing.T) (srvs [2]*httptest.Server, stores [2]*respstore.Redis) {
	t.Helper()
	mr := miniredis.RunT(t)
	_, upSrv := newRecordingUpstream(t)
	yml := strings.ReplaceAll(respYAML, "${UPSTREAM}", upSrv.URL)
	for i := range srvs {
		cfg, err := config.Load([]byte(yml), nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DataDir = ""
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		st := respstore.NewRedis(rdb, "sy:", time.Second, ResponsesConfig(cfg), respstore.NewLocal(time.Now, ResponsesConfig(cfg)), nil)
		t.Cleanup(func() { _ = st.Close(context.Background()) })
		n, err := Assemble(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: 1, Responses: st})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close(context.Background()) })
		srvs[i] = httptest.NewServer(n.Handler())
		t.Cleanup(srvs[i].Close)
		stores[i] = st
	}
	return srvs, stores
}

// GET /v1/responses/{id}/input_items, which the official SDKs call
// (client.Responses.InputItems.List). OpenAI API reference, Responses >
// "List input items": query after, limit (1-100, default 20), order
// (asc|desc, default desc), include; answers {"object":"list","data",
// "first_id","last_id","has_more"}; each item as the Responses API returns
// items (a message: id, type "message", role, content parts such as
// input_text, status). Before, gin answered 404 for the path.
func TestHostile5ResponsesInputItems(t *testing.T) {
	srvs, stores := inputItemsNodes(t)
	a, b := srvs[0], srvs[1]
	ctx := bounded(t)
	req, _ := http.NewRequestWithContext(ctx, "POST", a.URL+"/v1/responses", strings.NewReader(inputItemsBody))
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		ID string `json:"id"`
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || json.Unmarshal(raw, &created) != nil || created.ID == "" {
		t.Fatalf("create: %d %s", resp.StatusCode, raw)
	}
	// node a's write reaches Redis before node b reads
	if err := stores[0].Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ca, cb := sdk(a.URL, testKey), sdk(b.URL, testKey)

	// the default: newest first, 20 at most, all six here
	page, err := ca.Responses.InputItems.List(ctx, created.ID, responses.InputItemListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var list responses.ResponseItemList
	if err := json.Unmarshal([]byte(page.RawJSON()), &list); err != nil || list.Object != "list" || len(list.Data) != 6 || list.HasMore ||
		!list.JSON.HasMore.Valid() || list.FirstID != list.Data[0].ID || list.LastID != list.Data[5].ID {
		t.Fatalf("default page: %v %s", err, page.RawJSON())
	}
	desc := page.Data
	if m := desc[0]; m.Type != "message" || m.Role != "user" || m.Status != "completed" || len(m.Content.OfInputItemContentList) != 1 ||
		m.Content.OfInputItemContentList[0].Type != "input_text" || m.Content.OfInputItemContentList[0].Text != "thanks" {
		t.Fatalf("newest item: %s", m.RawJSON())
	}

	// the same order asked explicitly, paged two at a time, alternating
	// replicas: the ids are stable across calls and nodes
	var asc []responses.ResponseItemUnion
	after := ""
	for i := 0; ; i++ {
		c := ca
		if i%2 == 1 {
			c = cb
		}
		p := responses.InputItemListParams{Limit: openai.Int(2), Order: responses.InputItemListParamsOrderAsc}
		if after != "" {
			p.After = openai.String(after)
		}
		pg, err := c.Responses.InputItems.List(ctx, created.ID, p)
		if err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
		asc = append(asc, pg.Data...)
		if !pg.HasMore {
			break
		}
		if i > 5 || len(pg.Data) == 0 {
			t.Fatalf("paging does not end: page %d has %d items", i, len(pg.Data))
		}
		after = pg.Data[len(pg.Data)-1].ID
	}
	if len(asc) != 6 {
		t.Fatalf("asc pages hold %d items", len(asc))
	}
	seen := map[string]bool{}
	for i, it := range asc {
		if it.ID == "" || seen[it.ID] || it.ID != desc[5-i].ID {
			t.Fatalf("item %d id %q: empty, repeated, or not the id the desc listing gave (%q)", i, it.ID, desc[5-i].ID)
		}
		seen[it.ID] = true
		if it.Status != "completed" {
			t.Fatalf("item %d has no status: %s", i, it.RawJSON())
		}
	}
	// each item in its documented shape, decoded by the SDK
	dev := asc[0].AsMessage()
	if dev.Role != "developer" || len(dev.Content) != 1 || dev.Content[0].Text != "Answer in French." {
		t.Fatalf("developer message: %s", asc[0].RawJSON())
	}
	user := asc[1].AsMessage()
	if user.Role != "user" || len(user.Content) != 2 || user.Content[1].Type != "input_image" || user.Content[1].ImageURL != "https://x/y.png" {
		t.Fatalf("user message: %s", asc[1].RawJSON())
	}
	fc := asc[2].AsFunctionCall()
	if asc[2].Type != "function_call" || fc.ID != "fc_client_1" || fc.CallID != "call_1" || fc.Name != "get_weather" || fc.Arguments != `{"city":"Paris"}` {
		t.Fatalf("function call: %s", asc[2].RawJSON())
	}
	if asc[3].Type != "function_call_output" || asc[3].CallID != "call_1" || asc[3].Output.OfString != "sunny" {
		t.Fatalf("function call output: %s", asc[3].RawJSON())
	}
	out := asc[4].AsOutputMessage()
	if out.Role != "assistant" || len(out.Content) != 1 || out.Content[0].Type != "output_text" || out.Content[0].Text != "Il fait beau." {
		t.Fatalf("assistant message: %s", asc[4].RawJSON())
	}
	// the SDK's auto-pager, desc, one a page, on the other replica
	var all []string
	it := cb.Responses.InputItems.ListAutoPaging(ctx, created.ID, responses.InputItemListParams{Limit: openai.Int(1),
		Include: []responses.ResponseIncludable{responses.ResponseIncludableMessageInputImageImageURL}})
	for it.Next() {
		all = append(all, it.Current().ID)
		if len(all) > 10 {
			t.Fatal("auto-paging does not end")
		}
	}
	if err := it.Err(); err != nil || len(all) != 6 || all[0] != desc[0].ID || all[5] != desc[5].ID {
		t.Fatalf("auto-paging: %v %v", err, all)
	}

	// bad parameters: 400 naming the parameter
	var apiErr *openai.Error
	for _, tc := range []struct {
		q     string
		param string
	}{
		{"limit=0", "limit"}, {"limit=101", "limit"}, {"limit=x", "limit"}, {"order=up", "order"},
	} {
		w := do(t, mustHandler(t, a), "GET", "/v1/responses/"+created.ID+"/input_items?"+tc.q, testKey, "")
		var body struct{ Error struct{ Param string } }
		if w.Code != 400 || json.Unmarshal(w.Body.Bytes(), &body) != nil || body.Error.Param != tc.param {
			t.Fatalf("%s: %d %s", tc.q, w.Code, w.Body)
		}
	}
	// another team's id, an unknown id: 404 as GET answers
	other := sdk(a.URL, "sk-other")
	if _, err := other.Responses.InputItems.List(ctx, created.ID, responses.InputItemListParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("other team: %v", err)
	}
	if _, err := ca.Responses.InputItems.List(ctx, "resp_unknown", responses.InputItemListParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("unknown: %v", err)
	}
	// no key: 401
	if w := do(t, mustHandler(t, a), "GET", "/v1/responses/"+created.ID+"/input_items", "", ""); w.Code != 401 {
		t.Fatalf("no key: %d %s", w.Code, w.Body)
	}
}

// mustHandler is the handler behind a test server.
func mustHandler(t *testing.T, s *httptest.Server) http.Handler {
	t.Helper()
	return s.Config.Handler
}
