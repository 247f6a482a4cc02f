package compare

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"
)

// redisCounter counts the commands a Redis server executed, from INFO
// commandstats, leaving out its own INFO calls.
type redisCounter struct{ c *goredis.Client }

func (r redisCounter) requests(ctx context.Context) (int64, error) {
	info, err := r.c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		// cmdstat_get:calls=12,usec=...
		name, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			continue
		}
		total += n
	}
	return total, nil
}

// redsyncContender runs go-redsync/redsync/v4 on one Redis server (one
// pool, so no quorum across servers), one go-redis client per candidate.
// Its Lock retries up to 32 times, 50–250 ms apart (its defaults), and is
// called again in a loop until it succeeds; the holder renews with Extend
// every TTL/3 and stops leading when an extension fails: the loop users
// write, since redsync does not renew by itself.
type redsyncContender struct {
	addr, password string
	ttl            time.Duration
}

func (c *redsyncContender) Start(ctx context.Context, key, id string, onLead func()) (candidate, error) {
	cl := goredis.NewClient(&goredis.Options{Addr: c.addr, Password: c.password})
	m := redsync.New(redsyncgoredis.NewPool(cl)).NewMutex("compare-redsync:"+key, redsync.WithExpiry(c.ttl))
	runCtx, cancel := context.WithCancel(ctx)
	rc := &redsyncCandidate{cl: cl, cancel: cancel, release: make(chan struct{}), crash: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(rc.done)
		for m.LockContext(runCtx) != nil {
			if runCtx.Err() != nil {
				return
			}
		}
		onLead()
		tick := time.NewTicker(c.ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if ok, err := m.ExtendContext(runCtx); !ok || err != nil {
					return // lost: stop leading
				}
			case <-rc.release:
				uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, _ = m.UnlockContext(uctx)
				cancel()
				return
			case <-rc.crash:
				return
			case <-runCtx.Done():
				return
			}
		}
	}()
	return rc, nil
}

type redsyncCandidate struct {
	cl                        *goredis.Client
	cancel                    context.CancelFunc
	release, crash            chan struct{}
	done                      chan struct{}
	relOnce, crOnce, stopOnce sync.Once
}

// Release unlocks, as redsync's users do.
func (c *redsyncCandidate) Release() { c.relOnce.Do(func() { close(c.release) }) }

// Crash stops the renew loop without unlocking.
func (c *redsyncCandidate) Crash() {
	c.crOnce.Do(func() { close(c.crash) })
	<-c.done
	c.cl.Close()
}

func (c *redsyncCandidate) Stop() {
	c.stopOnce.Do(func() {
		c.cancel()
		<-c.done
		c.cl.Close()
	})
}

// redisCounterFor connects a counting client to the server, closed by
// t.Cleanup.
func redisCounterFor(t interface{ Cleanup(func()) }, addr, password string) redisCounter {
	c := goredis.NewClient(&goredis.Options{Addr: addr, Password: password})
	t.Cleanup(func() { c.Close() })
	return redisCounter{c: c}
}
