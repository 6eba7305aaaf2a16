package node

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"switchyard/config"
)

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{}) // the fault tests make go-redis log every refused dial
	os.Exit(m.Run())
}

func do(t *testing.T, h http.Handler, method, path, key, body string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// assemble loads yml and assembles a Redis node from it, with go-redis's
// and the node's logs silenced and routing seeded by seed.
func assemble(t *testing.T, yml string, seed int64) *Node {
	t.Helper()
	cfg, err := config.Load([]byte(yml), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Assemble(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
