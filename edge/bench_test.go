package edge

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"switchyard/bench/floor"
	"switchyard/catalog"
	"switchyard/cluster"
	"switchyard/config"
	"switchyard/internal/redistest"
	"switchyard/internal/teamtest"
)

// BenchmarkBegin measures one request's edge work against a real
// redis-server, one request at a time: Begin and Finish of a limited team
// (the writer running as in production), next to the floor's one EVALSHA
// with go-redis's default client and with the node's client, and the
// least a GCRA admission on Redis's clock costs (minimalGCRA).
func BenchmarkBegin(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	admin := srv.Client()
	defer admin.Close()
	run := func(name string, f func(b *testing.B)) {
		b.Run(name, func(b *testing.B) {
			before := scriptUsec(b, admin)
			f(b)
			if d := scriptUsec(b, admin) - before; b.N > 0 {
				b.ReportMetric(d/float64(b.N), "redis-µs/op")
			}
		})
	}
	run("floor-default-client", func(b *testing.B) {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		defer c.Close()
		for b.Loop() {
			if err := floor.Script.Run(ctx, c, []string{floor.Key}).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	conn, err := cluster.Connect(config.Redis{URL: srv.URL(), Timeout: cluster.DefaultTimeout}, cluster.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	run("floor-node-client", func(b *testing.B) {
		for b.Loop() {
			if err := floor.Script.Run(ctx, conn.Client, []string{floor.Key}).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	run("floor-gcra-node-client", func(b *testing.B) { // SPEC 16's floor
		for b.Loop() {
			if err := floor.GCRA.Run(ctx, conn.Client, floor.GCRAKeys, floor.GCRAArgs...).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	run("gcra-minimal-node-client", func(b *testing.B) {
		args := []any{int64(100_000_000), int64(100_000_000_000), int64(41)}
		for b.Loop() {
			if err := minimalGCRA.Run(ctx, conn.Client, []string{"bench:{team:min}:tat"}, args...).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	run("begin-finish", func(b *testing.B) { benchBeginFinish(b, conn) })
	if err := conn.Warm(ctx); err != nil {
		b.Fatal(err)
	}
	run("floor-node-client-warm", func(b *testing.B) {
		for b.Loop() {
			if err := floor.Script.Run(ctx, conn.Client, []string{floor.Key}).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	run("begin-finish-warm", func(b *testing.B) { benchBeginFinish(b, conn) })
}

// scriptUsec is the time Redis has spent in scripts (EVAL, EVALSHA and
// their inner commands) since it started, in µs: what one sub-benchmark
// costs Redis is its change per iteration (redis-µs/op), the part of the
// round trip the script's work adds on Redis's thread.
func scriptUsec(b *testing.B, c *redis.Client) float64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, _ := strconv.ParseFloat(v, 64)
				sum += n
			}
		}
	}
	return sum
}

// minimalGCRA is the least an admission on Redis's clock can do (SPEC 3):
// read the clock, read the TATs, write them back; one team, rpm and tpm,
// no slots, budget, pins, releases or header values. Beside the floor's
// INCR it is the lower bound of beginLua's round trip. One at a time on a
// 2-core VM (2026-12-01, p50 of 24,000 interleaved calls each) it was about
// 25 us slower than the floor's, and beginLua about 55 us. The arguments
// are not what the 30 between them cost: on 2026-12-02 an empty script
// given beginLua's 3 keys and 14 arguments was as fast as one given a
// single key; the script's work inside Redis is.
var minimalGCRA = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local W = 60000000
local v = redis.call('GET', KEYS[1])
local r, tt = 0, 0
if v then
  local a, b = string.match(v, '^([^:]*):(.*)$')
  r, tt = tonumber(a) or 0, tonumber(b) or 0
end
r = math.max(r, now) + W / tonumber(ARGV[1])
tt = math.max(tt, now) + tonumber(ARGV[3]) * W / tonumber(ARGV[2])
if r - W - now > 1 or tt - W - now > 1 then return 0 end
redis.call('SET', KEYS[1], string.format('%.17g:%.17g', r, tt), 'PX', math.ceil((math.max(r, tt) - now) / 1000) + 1)
return 1`)

func benchBeginFinish(b *testing.B, conn *cluster.Conn) {
	r := NewRedis(conn.Client, conn, Config{}, nil, nil, nil, nil)
	defer r.Close(context.Background())
	loopBeginFinish(b, r, 1)
}

// cannedClient answers every admission script at once with an admitted
// decision: BenchmarkBeginCPU measures the edge's own work per request.
type cannedClient struct{ Client }

func (cannedClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	c := redis.NewCmd(ctx)
	// gcraLua's values for one admitted team-only admission: allowed, kind,
	// wait, level, then the team's rpm left and reset, tpm left and reset,
	// tpm TAT, budget window
	c.SetVal([]any{int64(1), int64(0), int64(0), int64(0), int64(99), int64(600), int64(9999), int64(600), int64(1_796_000_000_000_000), int64(0)})
	return c
}

// BenchmarkBeginCPU is Begin and Finish of a limited team against a client
// that answers at once: the CPU the edge adds to a request besides the
// round trip.
// With teams=10000 each request is the next of 10,000 teams, as in
// bench/overhead.sh -m: the per-team records are out of cache.
func BenchmarkBeginCPU(b *testing.B) {
	for _, n := range []int{1, 10_000} {
		b.Run(fmt.Sprintf("teams=%d", n), func(b *testing.B) {
			loopBeginFinish(b, newRedis(cannedClient{}, nil, Config{OneShard: true}, nil, nil, nil, nil), n)
		})
	}
}

// loopBeginFinish is one limited team's request, Begin then Finish, per
// benchmark iteration, the team the next of n in turn.
func loopBeginFinish(b *testing.B, r *Redis, n int) {
	teams := make([]*catalog.Team, n)
	for i := range teams {
		teams[i] = teamtest.Team(fmt.Sprintf("t%d", i), teamtest.Limits{RPM: 1e8, TPM: 1e11})
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		team := teams[i%n]
		i++
		bg, err := r.Begin(ctx, &Request{RequestID: "r", Team: team, Tokens: 25})
		if err != nil || !bg.Decision.Allowed || bg.Local {
			b.Fatal(err, bg.Decision.Allowed, bg.Local)
		}
		r.Finish(&bg, &Outcome{Served: true, Deployment: "mock-1", PromptTokens: 9, CompletionTokens: 16})
	}
}
