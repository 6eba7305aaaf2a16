// Package redisscript runs Lua scripts in pipelines with the one recovery
// every caller needs: calls Redis answered NOSCRIPT (its script cache was
// flushed by a restart or a failover) are sent again once the script is
// loaded.
package redisscript

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Client is what running scripts in a pipeline takes.
type Client interface {
	redis.Scripter
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// Call is one script invocation in a pipeline.
type Call struct {
	Keys []string
	Args []any
}

// EvalPipelined runs s once per call in one pipeline (go-redis splits it per
// node on Cluster). Calls answered NOSCRIPT did not run; the script is
// loaded and they are sent once more.
func EvalPipelined(ctx context.Context, c Client, s *redis.Script, calls []Call) []*redis.Cmd {
	out := make([]*redis.Cmd, len(calls))
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, call := range calls {
			out[i] = s.EvalSha(ctx, p, call.Keys, call.Args...)
		}
		return nil
	})
	var again []int
	for i, cmd := range out {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) == 0 || s.Load(ctx, c).Err() != nil {
		return out
	}
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, i := range again {
			out[i] = s.EvalSha(ctx, p, calls[i].Keys, calls[i].Args...)
		}
		return nil
	})
	return out
}
