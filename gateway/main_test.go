package gateway

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{}) // the fault tests make go-redis log every refused dial
	os.Exit(m.Run())
}
