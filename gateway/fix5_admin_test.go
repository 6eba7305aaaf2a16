package gateway

import (
	"context"
	"crypto/sha256"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
)

// lostReply is a go-redis hook that loses the reply of the next catalog
// save script (SPEC 11): with run the script runs in Redis first (the
// change lands, only its answer is lost, as on a read timeout), without it
// the script never reaches Redis. With failAfter the one command after it
// fails too (Redis stayed unreachable for the read-back).
type lostReply struct {
	run, failAfter  bool // immutable once armed
	armed, failNext atomic.Bool
}

var errReadTimeout = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

func (h *lostReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *lostReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *lostReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.failNext.CompareAndSwap(true, false) {
			cmd.SetErr(errReadTimeout)
			return errReadTimeout
		}
		name := cmd.Name()
		if (name != "evalsha" && name != "eval") || !h.armed.Load() {
			return next(ctx, cmd)
		}
		if h.run {
			if err := next(ctx, cmd); err != nil {
				return err // NOSCRIPT: go-redis sends the script itself next
			}
		}
		h.armed.Store(false)
		h.failNext.Store(h.failAfter)
		cmd.SetErr(errReadTimeout)
		return errReadTimeout
	}
}

// A key issue whose save timed out after the script ran must not answer
// 503 "nothing was changed" (a client that retries then makes a second key
// whose secret nobody saw, the first one live): the gateway reads back
// whether the save landed and answers 201 with the key as issued. A save
// that never reached Redis is still 503 and changes nothing; one whose
// outcome could not be read back says so instead of "nothing was changed".
func TestFix5AdminSaveReplyLost(t *testing.T) {
	for _, tc := range []struct {
		name      string
		run, fail bool // the script ran; the read-back fails too
		status    int
		stored    int // keys named "ci" in the stored catalog
	}{
		{"landed", true, false, 201, 1},
		{"never sent", false, false, 503, 0},
		{"unknown", true, true, 503, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { _ = rc.Close() })
			h := &lostReply{run: tc.run, failAfter: tc.fail}
			rc.AddHook(h)
			store := catalog.NewRedisStore(rc, "f5:", time.Second)
			n := adminNode(t, store)
			before := n.Server.Catalog.Load().Version
			h.armed.Store(true)
			w := adm(t, n, "POST", "/admin/teams/t/keys", `{"name":"ci"}`)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			h.failNext.Store(false) // Redis is back for the test's own read
			st, ok, err := store.Load(context.Background())
			if err != nil || !ok {
				t.Fatalf("load: ok=%v err=%v", ok, err)
			}
			var keys []catalog.Key
			for _, tm := range st.Teams {
				for _, k := range tm.Keys {
					if k.Name == "ci" {
						keys = append(keys, k)
					}
				}
			}
			if len(keys) != tc.stored {
				t.Fatalf("%d keys named ci stored, want %d", len(keys), tc.stored)
			}
			switch tc.status {
			case 201:
				var got struct{ ID, Key, Prefix string }
				decodeJSON(t, w, &got)
				sum := sha256.Sum256([]byte(got.Key))
				if got.ID != keys[0].ID || got.Prefix != keys[0].Prefix || catalog.Digest(sum) != keys[0].Digest {
					t.Fatalf("answered key %+v is not the stored one %+v", got, keys[0])
				}
				if v := n.Server.Catalog.Load().Version; v != st.Version || v <= before {
					t.Fatalf("serving version %d, stored %d (was %d)", v, st.Version, before)
				}
				if code := chat(t, n, got.Key, "a"); code != 200 {
					t.Fatalf("the answered key does not work: %d", code)
				}
			case 503:
				var e apiErr
				decodeJSON(t, w, &e)
				nothing := strings.Contains(e.Error.Message, "nothing was changed")
				if tc.stored == 0 && !nothing {
					t.Fatalf("a save that never reached Redis: %s", w.Body)
				}
				if tc.stored > 0 && (nothing || e.Error.Code == "catalog_store_unavailable") {
					t.Fatalf("a save that may have landed answered as if nothing changed: %s", w.Body)
				}
			}
		})
	}
}
