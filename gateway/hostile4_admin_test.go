package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
	"switchyard/config"
)

// A Redis that comes back empty (restarted without persistence, flushed)
// or from an older snapshot than the catalog the replicas serve must not
// lock the admin API out: the next admin write stores the served catalog
// with the change (its version moving forward), instead of answering 409
// "kept changing concurrently" on every write until every node restarts.
func TestHostile4AdminWriteAfterStoreLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(mr *miniredis.Miniredis, old map[string]string)
	}{
		{"flushed", func(mr *miniredis.Miniredis, _ map[string]string) { mr.FlushAll() }},
		{"older snapshot", func(mr *miniredis.Miniredis, old map[string]string) {
			for k, v := range old {
				_ = mr.Set(k, v)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { _ = rc.Close() })
			store := catalog.NewRedisStore(rc, "h4:", time.Second)
			n := adminNode(t, store)
			old := map[string]string{}
			for _, k := range mr.Keys() {
				old[k], _ = mr.Get(k)
			}
			if w := adm(t, n, "PUT", "/admin/fallbacks", `{"primaryModel":"b","fallbackModels":["c"]}`); w.Code != 200 {
				t.Fatalf("first write: %d %s", w.Code, w.Body)
			}
			served := n.Server.Catalog.Load().Version
			tc.lose(mr, old)
			if w := adm(t, n, "PUT", "/admin/fallbacks", `{"primaryModel":"c","fallbackModels":["b"]}`); w.Code != 200 {
				t.Fatalf("write after the store was lost: %d %s", w.Code, w.Body)
			}
			st, ok, err := store.Load(context.Background())
			if err != nil || !ok {
				t.Fatalf("nothing stored: ok=%v err=%v", ok, err)
			}
			if st.Version <= served || len(st.Fallbacks) != 3 {
				t.Fatalf("stored version %d (served %d), chains %+v: want the served catalog and the change", st.Version, served, st.Fallbacks)
			}
			if v := n.Server.Catalog.Load().Version; v != st.Version {
				t.Fatalf("serving version %d, stored %d", v, st.Version)
			}
		})
	}
}

// An admin body of the wrong JSON type is a 400 naming the field and the
// fix (SPEC 11). A budget period is a string (daily, weekly, monthly or a
// duration): the answer must not ask for a JSON object; a count given as
// 1e3 or past int64, or a price past float64, must not be told it should
// be "a JSON number" when it is one.
func TestHostile4AdminTypeErrorsSayTheFix(t *testing.T) {
	n := adminNode(t, nil)
	var k struct{ ID string }
	decodeJSON(t, adm(t, n, "POST", "/admin/teams/t/keys", `{"name":"ci"}`), &k)
	id := k.ID
	for _, tc := range []struct {
		path, body, param string
		want, never       []string
	}{
		{"/admin/teams/t", `{"models":["*"],"budget":{"usd":5,"period":86400}}`, "budget.period",
			[]string{"string", "daily"}, []string{"JSON object"}},
		{"/admin/teams/t", `{"models":["*"],"budget":{"usd":5,"period":{"every":"24h"}}}`, "budget.period",
			[]string{"string", "daily"}, []string{"must be a JSON object"}},
		{"/admin/teams/t", `{"models":["*"],"rpm":1e3}`, "rpm",
			[]string{"whole number"}, []string{"must be a JSON number, got a JSON number"}},
		{"/admin/teams/t", `{"models":["*"],"tpm":99999999999999999999}`, "tpm",
			[]string{"whole number"}, []string{"must be a JSON number, got a JSON number"}},
		{"/admin/teams/t", `{"models":["*"],"rpm":"60"}`, "rpm",
			[]string{"whole number", "string"}, nil},
		{"/admin/teams/t/keys", `{"name":"x","budget":{"usd":1e400}}`, "budget.usd",
			[]string{"range"}, []string{"must be a JSON number, got a JSON number"}},
		{"/admin/teams/t/keys/" + id, `{"budget":{"period":5}}`, "budget.period",
			[]string{"string", "daily"}, []string{"JSON ptr"}},
	} {
		var w *httptest.ResponseRecorder
		switch {
		case tc.path == "/admin/teams/t":
			w = adm(t, n, "PUT", tc.path, tc.body)
		case tc.path == "/admin/teams/t/keys":
			w = adm(t, n, "POST", tc.path, tc.body)
		default:
			w = adm(t, n, "PATCH", tc.path, tc.body)
		}
		var e struct {
			Error struct{ Message, Param string }
		}
		decodeJSON(t, w, &e)
		if w.Code != 400 || e.Error.Param != tc.param {
			t.Errorf("%s: %d param %q, want 400 %q", tc.body, w.Code, e.Error.Param, tc.param)
		}
		for _, s := range tc.want {
			if !strings.Contains(e.Error.Message, s) {
				t.Errorf("%s: message %q does not say %q", tc.body, e.Error.Message, s)
			}
		}
		for _, s := range tc.never {
			if strings.Contains(e.Error.Message, s) {
				t.Errorf("%s: message %q says %q", tc.body, e.Error.Message, s)
			}
		}
	}
}

// decode's contract: trailing data after the JSON object is a 400. A
// closing bracket or brace after it was taken as the end of the body, and
// a body that is not an object was answered with a message that named no
// field (": must be a JSON object").
func TestHostile4AdminBodyShape(t *testing.T) {
	n := adminNode(t, nil)
	for _, body := range []string{`{"models":["*"]}}`, `{"models":["*"]}]`, `{"models":["*"]} {}`, `{"models":["*"]} x`} {
		w := adm(t, n, "PUT", "/admin/teams/t", body)
		if w.Code != 400 || !strings.Contains(w.Body.String(), "after the JSON object") {
			t.Errorf("%s: %d %s", body, w.Code, w.Body)
		}
	}
	for _, body := range []string{`[{"models":["*"]}]`, `"x"`, `5`} {
		w := adm(t, n, "PUT", "/admin/teams/t", body)
		if w.Code != 400 || !strings.Contains(w.Body.String(), "request body must be a JSON object") {
			t.Errorf("%s: %d %s", body, w.Code, w.Body)
		}
	}
	if w := adm(t, n, "PUT", "/admin/teams/t", "{\"models\":[\"*\"]}\n \t"); w.Code != 200 {
		t.Errorf("trailing whitespace: %d %s", w.Code, w.Body)
	}
}

// Key names are not unique within a team (a key is rotated by issuing its
// successor under the same name, then revoking the old one). A key asked
// for by a name two keys of the team share must not answer one of them
// silently (the older key's usage, for the key just issued), and the usage
// query must not suggest adding team= when the keys are of one team: both
// ask for the id. An id always wins over a name.
func TestHostile4AdminKeyNameSharedInATeam(t *testing.T) {
	n := adminNode(t, nil)
	var ids []string
	for range 2 {
		var k struct{ ID string }
		decodeJSON(t, adm(t, n, "POST", "/admin/teams/t/keys", `{"name":"ci","rpm":5}`), &k)
		ids = append(ids, k.ID)
	}
	w := adm(t, n, "GET", "/admin/teams/t/keys/ci/usage", "")
	if w.Code != 400 || !strings.Contains(w.Body.String(), ids[0]) || !strings.Contains(w.Body.String(), ids[1]) {
		t.Errorf("usage by a shared name: %d %s", w.Code, w.Body)
	}
	for _, id := range ids {
		var u struct{ Key string }
		w := adm(t, n, "GET", "/admin/teams/t/keys/"+id+"/usage", "")
		decodeJSON(t, w, &u)
		if w.Code != 200 || u.Key != id {
			t.Errorf("usage by id %s: %d %s", id, w.Code, w.Body)
		}
	}
	w = adm(t, n, "GET", "/admin/usage?team=t&key=ci", "")
	if w.Code != 400 || strings.Contains(w.Body.String(), "add team=") || !strings.Contains(w.Body.String(), ids[1]) {
		t.Errorf("usage query by a shared name: %d %s", w.Code, w.Body)
	}
}

// A reload reports the fields that only a restart applies and keeps their
// running value (SPEC 11; Reloader.Apply's contract). The collector and
// runtime settings (server.gc_percent, procs, memory_limit), tracing, the
// Responses store and the response cache's switch, TTLs and local store
// (models[].cache included) are built once at start: a reload changing
// them answered as if nothing had changed, or with "server" applied.
func TestHostile4ReloadReportsEveryRestartOnlyField(t *testing.T) {
	n, path, _ := reloadNode(t, reloadYAML)
	changed := strings.Replace(reloadYAML, `admin: {key: admin-secret}`, `admin: {key: admin-secret}
server: {gc_percent: 70, procs: "2", memory_limit: 512MiB, max_body_bytes: 2048}
tracing: {sample_ratio: 0.5}
responses: {store_ttl: 1h}
cache: {enabled: true, ttl: 5m, max_local_bytes: 2097152}
models: [{name: a, strategy: simple_shuffle, cache: {ttl: 10m}}]`, 1)
	rewrite(t, path, changed)
	rep, err := n.Reloader.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"server.gc_percent", "server.procs", "server.memory_limit", "tracing", "responses",
		"cache.enabled", "cache.ttl", "cache.max_local_bytes", "models[].cache"} {
		if !slices.Contains(rep.NotApplied, f) {
			t.Errorf("%s changed but is not reported as needing a restart: %+v", f, rep)
		}
	}
	c := n.cfg()
	if c.Server.GCPercent == 70 || c.Cache.Enabled || c.Tracing.SampleRatio == 0.5 || c.Responses.StoreTTL == time.Hour {
		t.Errorf("a restart-only field took the file's value: %+v %+v", c.Server, c.Cache)
	}
	if c.Server.MaxBodyBytes != 2048 || !slices.Contains(rep.Applied, "server") {
		t.Errorf("server.max_body_bytes is live: %d %+v", c.Server.MaxBodyBytes, rep)
	}
}

// hookStore runs onLoad once, armed, inside a Load (under the admin's
// write lock, between a change's read and its save).
type hookStore struct {
	catalog.MemoryStore
	armed  bool
	onLoad func()
}

func (h *hookStore) Load(ctx context.Context) (*catalog.State, bool, error) {
	if h.armed {
		h.armed = false
		h.onLoad()
	}
	return h.MemoryStore.Load(ctx)
}

// Two reloads in a row (SIGHUP, then POST /admin/reload): the catalog's
// config keys follow the file the later one applied. The earlier reload's
// key sync, still on its way when the later reload had published its file
// and found the keys in order, stored the earlier file's keys over it: a
// key the later file gives back stayed revoked (401) while the running
// configuration lists it.
func TestHostile4ReloadKeysFollowTheLastFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchyard.yaml")
	rewrite(t, path, reloadYAML)
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	store := &hookStore{}
	n, err := Assemble(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: 1, ConfigPath: path, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })

	var second error
	store.onLoad = func() { // the first reload's sync is under way: the file is put back and reloaded
		rewrite(t, path, reloadYAML)
		_, second = n.Reloader.Reload(context.Background())
	}
	store.armed = true
	rewrite(t, path, strings.Replace(reloadYAML, `keys: ["sk-web", "sk-old"]`, `keys: ["sk-web"]`, 1))
	if _, err := n.Reloader.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if second != nil || store.armed {
		t.Fatalf("second reload: %v (ran: %v)", second, !store.armed)
	}
	if code := chat(t, n, "sk-old", "a"); code != 200 {
		t.Fatalf("sk-old, listed by the file applied last: %d", code)
	}
}
