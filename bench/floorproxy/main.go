// Command floorproxy is the baseline of SPEC 16: a bare
// httputil.ReverseProxy that, with -redis, makes one Redis EVALSHA per
// request before proxying: the GCRA floor (floor.GCRA, -limiter gcra, the
// default) or the older counter (floor.Script, -limiter counter). The gateway's
// throughput and added latency are reported as ratios against it, measured
// in the same run on the same machine. With -pprof it serves
// net/http/pprof on a second address, for bench/profile1.sh's comparison of
// where the gateway and the floor spend a request's CPU.
package main

import (
	"flag"
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
	}
	log.Fatal(http.ListenAndServe(*listen, h))
}
