// Command floorproxy is the baseline of SPEC 16: a bare
// httputil.ReverseProxy that, with -redis, makes one Redis EVALSHA per
// request before proxying: the GCRA floor (floor.GCRA, -limiter gcra, the
// default) or the older counter (floor.Script, -limiter counter). The gateway's
// throughput and added latency are reported as ratios against it, measured
// in the same run on the same machine. With -pprof it serves
// net/http/pprof on a second address, for bench/profile1.sh's comparison of
// where the gateway and the floor spend a request's CPU.
//
// With -cache (and -redis, the GCRA floor) it is the miss floor: the least
// a shared response cache's miss can cost (SPEC 18), which no
// implementation of section 18 can go below: the request's body hashed with
// SHA-256 into the entry's key, floor.Miss in place of floor.GCRA (the
// entry read and the coalescing lease taken in the same call), and the
// answer, once complete, written to Redis by one background writer that
// pipelines every entry queued while its last write ran. It keeps no local
// copy, canonicalizes nothing and renders nothing, so a real cache can only
// cost more.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	_ "net/http/pprof" // on http.DefaultServeMux, served only with -pprof
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/bench/floor"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:19003", "address to listen on")
	upstream := flag.String("upstream", "http://127.0.0.1:19001", "upstream base URL")
	redisAddr := flag.String("redis", "", "redis host:port; empty = no Redis call")
	limiter := flag.String("limiter", "gcra", "the script of the Redis call: gcra (SPEC 16's floor) or counter")
	pprofAddr := flag.String("pprof", "", "address to serve net/http/pprof on; empty = none")
	cache := flag.Bool("cache", false, "with -redis and -limiter gcra: the miss floor of SPEC 18 (see the command's comment)")
	lease := flag.Bool("lease", true, "with -cache: take the coalescing lease (false: only read the entry, a cache without coalescing)")
	flag.Parse()
	if *pprofAddr != "" {
		go func() { log.Fatal(http.ListenAndServe(*pprofAddr, nil)) }()
	}
	u, err := url.Parse(*upstream)
	if err != nil {
		log.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second}
	var h http.Handler = rp
	if *redisAddr != "" {
		c := redis.NewClient(&redis.Options{Addr: *redisAddr})
		s, keys, args := floor.GCRA, floor.GCRAKeys, floor.GCRAArgs
		switch *limiter {
		case "gcra":
		case "counter":
			s, keys, args = floor.Script, []string{floor.Key}, nil
		default:
			log.Fatalf("-limiter %q: want gcra or counter", *limiter)
		}
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := s.Run(r.Context(), c, keys, args...).Err(); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			rp.ServeHTTP(w, r)
		})
		if *cache {
			if *limiter != "gcra" {
				log.Fatal("-cache needs -limiter gcra")
			}
			h = missFloor(c, rp, *lease)
		}
	} else if *cache {
		log.Fatal("-cache needs -redis")
	}
	log.Fatal(http.ListenAndServe(*listen, h))
}

// maxEntry bounds what the miss floor keeps of an answer (SPEC 18's
// max_entry_bytes default); a longer answer is not stored.
const maxEntry = 1 << 20

// entryCtx carries a request's entry key to ModifyResponse.
type entryCtx struct{}

// entry is one complete answer for the writer.
type entry struct{ key, body string }

// missFloor is -cache's handler: floor.Miss (with the lease or without),
// then the proxy, whose answers
// (status 200, read to the end) are queued for the writer; a full queue
// drops the entry rather than wait.
func missFloor(c *redis.Client, rp *httputil.ReverseProxy, lease bool) http.Handler {
	lf := "1"
	if !lease {
		lf = "0"
	}
	queue := make(chan entry, 4096)
	go writeEntries(c, queue)
	rp.ModifyResponse = func(resp *http.Response) error {
		if k, ok := resp.Request.Context().Value(entryCtx{}).(string); ok && resp.StatusCode == http.StatusOK {
			resp.Body = &capture{ReadCloser: resp.Body, key: k, queue: queue}
		}
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxEntry))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sum := sha256.Sum256(body)
		key := floor.EntryKey(hex.EncodeToString(sum[:]))
		keys := append(append([]string(nil), floor.GCRAKeys...), key)
		res, err := floor.Miss.Run(r.Context(), c, keys, append(floor.GCRAArgs, "!lease", 30000, lf)...).Result()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		if hit, ok := res.(string); ok {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, hit)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), entryCtx{}, key)))
	})
}

// capture keeps what the client is sent of an answer and queues it once
// read to its end.
type capture struct {
	io.ReadCloser
	key   string
	buf   []byte
	over  bool
	queue chan<- entry
}

func (c *capture) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if !c.over {
		if len(c.buf)+n > maxEntry {
			c.over, c.buf = true, nil
		} else {
			c.buf = append(c.buf, p[:n]...)
		}
	}
	if err == io.EOF && !c.over {
		select {
		case c.queue <- entry{key: c.key, body: string(c.buf)}:
		default:
		}
		c.over = true
	}
	return n, err
}

// writeEntries sends the queued entries, every entry queued while the last
// pipeline ran in the next one (group commit), with the default ttl.
func writeEntries(c *redis.Client, queue <-chan entry) {
	ctx := context.Background()
	for first := range queue {
		p := c.Pipeline()
		p.Set(ctx, first.key, first.body, time.Hour)
	drain:
		for i := 0; i < 255; i++ {
			select {
			case e := <-queue:
				p.Set(ctx, e.key, e.body, time.Hour)
			default:
				break drain
			}
		}
		if _, err := p.Exec(ctx); err != nil {
			log.Printf("miss floor: writing entries: %v", err)
		}
	}
}
