package gateway

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"switchyard/config"
)

// At start a node syncs its file's config keys into a catalog it loads
// (a key removed from the file is revoked, a new one works), and leaves a
// catalog alone when the file changed none: the state file is not
// rewritten. A node that seeds the catalog starts with the file's keys.
func TestStartSyncsConfigKeys(t *testing.T) {
	dir := t.TempDir()
	start := func(key string) {
		t.Helper()
		cfg, err := config.Load([]byte(strings.Replace(simYAML, `keys: ["sk-test"]`, `keys: ["`+key+`"]`, 1)), nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DataDir = dir
		n, err := Assemble(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = n.Close(context.Background()) }()
		for _, k := range []string{"sk-one", "sk-two"} {
			want := 401
			if k == key {
				want = 200
			}
			if w := do(t, n.Handler(), "POST", "/v1/chat/completions", k, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); w.Code != want {
				t.Fatalf("started with %s: %s answered %d, want %d", key, k, w.Code, want)
			}
		}
	}
	version := func() int64 {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "catalog.json"))
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ Version int64 }
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return v.Version
	}
	if !strings.Contains(simYAML, `keys: ["sk-test"]`) {
		t.Fatal("simYAML changed: this test swaps its key")
	}
	start("sk-one") // seeds
	v1 := version()
	start("sk-two") // loads; the file swapped the key
	v2 := version()
	if v2 <= v1 {
		t.Fatalf("the changed key was not stored: version %d then %d", v1, v2)
	}
	start("sk-two") // loads; nothing changed
	if v3 := version(); v3 != v2 {
		t.Fatalf("an unchanged file rewrote the catalog: version %d then %d", v2, v3)
	}
}
