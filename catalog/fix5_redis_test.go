package catalog

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// cutProxy stands between go-redis and miniredis and loses what a flaky
// network loses around one catalog save (SPEC 9, 11).
type cutProxy struct {
	ln     net.Listener
	target string

	afterRun atomic.Bool // the save script runs; its reply is lost with the connection
	before   atomic.Bool // the save script is lost with the connection before Redis sees it
	refuse   atomic.Bool // once set, every connection is closed at once (Redis unreachable)
	onCut    func()      // immutable; called when a cut happens (nil: nothing)

	mu    sync.Mutex
	conns []net.Conn // guarded by mu
}

func startCutProxy(t *testing.T, target string, onCut func()) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, onCut: onCut}
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.refuse.Load() {
				_ = c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go p.pump(c, s)
		}
	}()
	return p
}

func (p *cutProxy) cut(c, s net.Conn) {
	if p.onCut != nil {
		p.onCut()
	}
	_ = c.Close()
	_ = s.Close()
}

// pump relays one connection. A save script is recognised by its state
// key among the arguments; its reply (an integer) is the next one Redis
// sends on that connection.
func (p *cutProxy) pump(c, s net.Conn) {
	var sawSave atomic.Bool
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if bytes.Contains(buf[:n], []byte("{catalog}:state")) && bytes.Contains(bytes.ToLower(buf[:n]), []byte("eval")) {
					if p.before.CompareAndSwap(true, false) {
						p.cut(c, s)
						return
					}
					sawSave.Store(true)
				}
				if _, werr := s.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = s.Close()
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if sawSave.Load() && buf[0] == ':' && p.afterRun.CompareAndSwap(true, false) {
				p.cut(c, s)
				return
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = c.Close()
			return
		}
	}
}

// A save whose reply is lost (the connection cut after Redis ran the
// script) is found out in one bounded read: it landed, so Save reports
// success, also when go-redis resends the script on a fresh connection
// (the retry must not see its own write as a concurrent change). A save
// that never reached Redis is ErrUnavailable (nothing changed); one whose
// read-back fails too is ErrSaveUnknown, never "nothing changed"; one
// another writer beat is ErrConflict.
func TestFix5RedisSaveReplyLost(t *testing.T) {
	for _, tc := range []struct {
		name        string
		retries     int  // go-redis MaxRetries (-1: none)
		ran, refuse bool // the script ran before the cut; Redis is unreachable after it
		other       bool // another writer saves base+1 at the cut
		want        error
		stored      int64 // version stored afterwards
	}{
		{"landed, go-redis retries", 0, true, false, false, nil, 8},
		{"landed, no retry", -1, true, false, false, nil, 8},
		{"never sent", -1, false, false, false, ErrUnavailable, 5},
		{"unknown", -1, true, true, false, ErrSaveUnknown, 8},
		{"another writer", -1, false, false, true, ErrConflict, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			var p *cutProxy
			p = startCutProxy(t, mr.Addr(), func() {
				if tc.other {
					_ = mr.Set("f5:{catalog}:version", "6")
					_ = mr.Set("f5:{catalog}:state", `{"version":6,"schema":1}`)
				}
				p.refuse.Store(tc.refuse)
			})
			rc := redis.NewClient(&redis.Options{Addr: p.ln.Addr().String(), MaxRetries: tc.retries})
			t.Cleanup(func() { _ = rc.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s := NewRedisStore(rc, "f5:", time.Second)
			if err := s.Save(ctx, 0, &State{Version: 5, Schema: 1}); err != nil {
				t.Fatal(err)
			}
			if tc.ran {
				p.afterRun.Store(true)
			} else {
				p.before.Store(true)
			}
			err := s.Save(ctx, 5, &State{Version: 8, Schema: 1})
			switch {
			case tc.want == nil && err != nil, tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("Save: %v, want %v", err, tc.want)
			case tc.want == ErrUnavailable && errors.Is(err, ErrSaveUnknown), tc.want == ErrSaveUnknown && errors.Is(err, ErrUnavailable):
				t.Fatalf("Save: %v mixes up nothing changed and unknown", err)
			}
			v, gerr := mr.Get("f5:{catalog}:version")
			if gerr != nil || v != strconv.FormatInt(tc.stored, 10) {
				t.Fatalf("stored version %q (%v), want %d", v, gerr, tc.stored)
			}
		})
	}
}
