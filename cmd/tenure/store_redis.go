package main

// The Redis store: --store redis://[:password@]host:6379/0 (rediss:// for TLS)
import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	_ "github.com/tenurehq/tenure/store/redis"
)

// go-redis logs connection failures itself, on stderr, with its own format
// ("redis: 2026/11/22 ... pool.go:770: ..."). The store reports the same
// failures as errors, which tenure prints as one line each; the CLI drops
// the client's own lines so its output keeps to that.
func init() { goredis.SetLogger(discardRedisLog{}) }

type discardRedisLog struct{}

func (discardRedisLog) Printf(context.Context, string, ...any) {}
