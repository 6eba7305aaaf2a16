package edge

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"switchyard/config"
	"switchyard/internal/teamtest"
)

// levelsClient answers every admission script at once, admitting at every
// level with the values Redis gives a level far from its limits (resets of
// 1 µs, its rounding up): BenchmarkLevelsCPU measures the edge's own work.
type levelsClient struct{ Client }

func (levelsClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	n := 1 + (len(keys)-3)/3 // the team, then three keys per key or user level (one admission, no pins)
	v := make([]any, 0, beginHead+levelResults*n)
	v = append(v, int64(1), int64(0), int64(0), int64(0))
	for range n {
		v = append(v, int64(99), int64(1), int64(9999), int64(1), int64(1_796_000_000_000_000), int64(0))
	}
	c := redis.NewCmd(ctx)
	c.SetVal(v)
	return c
}

// BenchmarkLevelsCPU is Begin and Finish of a request that meets three
// levels (its team, its key, its end user; SPEC 3.1), all with limits far
// above the load, against a client that answers at once: levels=1 sends
// one key and one end user, levels=100000 the next of 100,000 keys and of
// 100,000 end users each time (bench/overhead.sh -l's lvone and lvmany).
// SPEC 16 wants the two within 10%.
func BenchmarkLevelsCPU(b *testing.B) {
	for _, n := range []int{1, 100_000} {
		b.Run(fmt.Sprintf("levels=%d", n), func(b *testing.B) {
			r := newRedis(levelsClient{}, nil, Config{OneShard: true}, nil, nil, nil, nil)
			team := teamtest.Team("lv", teamtest.Limits{RPM: 1e8, TPM: 1e11})
			lim := &config.Limits{RPM: 1e8, TPM: 1e11}
			keys, users := make([]Level, n), make([]Level, n)
			for i := range n {
				keys[i] = Level{Kind: LevelKey, ID: fmt.Sprintf("key-%d", i), Name: fmt.Sprintf("k%d", i), Limits: &config.Limits{RPM: 1e8, TPM: 1e11}}
				u := fmt.Sprintf("u%d", i)
				users[i] = Level{Kind: LevelUser, ID: u, Name: u, Limits: lim}
			}
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k, u := keys[i%n], users[(i*7919)%n]
				i++
				bg, err := r.Begin(ctx, &Request{RequestID: "r", Team: team, Tokens: 25, Key: k, User: u})
				if err != nil || !bg.Decision.Allowed || bg.Local {
					b.Fatal(err, bg.Decision.Allowed, bg.Local)
				}
				r.Finish(&bg, &Outcome{Served: true, Deployment: "mock-1", Model: "bench", KeyID: k.ID, User: u.ID, PromptTokens: 9, CompletionTokens: 16})
			}
		})
	}
}
