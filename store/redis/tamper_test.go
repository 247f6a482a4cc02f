package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/redis"
	"github.com/tenurehq/tenure/storetest"
)

// tamperOn changes the store's keys with plain Redis commands, as an
// operator running redis-cli would.
func tamperOn(srv *testserver.RedisServer, prefix string, db int) *storetest.Tamper {
	k := func(key, what string) string { return prefix + ":{" + key + "}:" + what }
	run := func(t testing.TB, args ...any) {
		t.Helper()
		c := client(t, srv)
		if db != 0 {
			if err := c.Do(ctxFor(t), "SELECT", db).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Do(ctxFor(t), args...).Err(); err != nil {
			t.Fatalf("tamper %v: %v", args, err)
		}
	}
	return &storetest.Tamper{
		DeleteGrant: func(t testing.TB, key string) { run(t, "DEL", k(key, "lease")) },
		OverwriteGrant: func(t testing.TB, key, id string) {
			run(t, "HSET", k(key, "lease"), "holder", id, "token", "overwritten")
		},
		DeleteAll: func(t testing.TB, key string) {
			run(t, "DEL", k(key, "lease"), k(key, "term"), k(key, "last"))
		},
	}
}

// heldKey acquires a new key on st for alpha, for 10 s, and returns the
// grant and the name of the key's lease hash (st has [redis.DefaultPrefix]).
func heldKey(t *testing.T, st *redis.Store) (l tenure.Lease, lease string) {
	t.Helper()
	l, err := st.Acquire(ctxFor(t), randomKey(), "alpha", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return l, recordKey(l.Key, "lease")
}

// heldForged acquires a new key on a new store on srv, as heldKey does,
// then changes what Redis keeps for it with forge, given the store, the
// grant and the name of its lease hash.
func heldForged(t *testing.T, srv *testserver.RedisServer, forge func(st *redis.Store, l tenure.Lease, lease string) error) (*redis.Store, tenure.Lease) {
	t.Helper()
	st := open(t, srv.URL(0))
	l, lease := heldKey(t, st)
	if err := forge(st, l, lease); err != nil {
		t.Fatal(err)
	}
	return st, l
}

// Issue 9 item 7: a server that may evict keys is refused, with the policy
// and both fixes named in one line.
func TestEvictingServerRefused(t *testing.T) {
	srv := testserver.Redis(t, false, "--maxmemory-policy", "allkeys-lru")
	st := open(t, srv.URL(0))
	_, err := st.Acquire(ctxFor(t), randomKey(), "alpha", time.Second)
	if !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("Acquire on an allkeys-lru server: got %v, want ErrInvalid", err)
	}
	for _, want := range []string{"allkeys-lru", "CONFIG SET maxmemory-policy noeviction", redis.EvictionCheckParam + "=skip"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), srv.Password) || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q quotes the password or spans lines", err)
	}
	if _, err := st.EvictionCheck(ctxFor(t)); !errors.Is(err, tenure.ErrInvalid) {
		t.Errorf("EvictionCheck: got %v, want ErrInvalid", err)
	}
	ok := open(t, testserver.Redis(t, false).URL(0))
	if what, err := ok.EvictionCheck(ctxFor(t)); err != nil || !strings.Contains(what, "noeviction") {
		t.Errorf("EvictionCheck on a noeviction server = %q, %v", what, err)
	}
	if _, err := redis.Open(ctxFor(t), srv.URL(0)+"?"+redis.EvictionCheckParam+"=maybe"); !errors.Is(err, tenure.ErrInvalid) {
		t.Errorf("Open with %s=maybe: got %v, want ErrInvalid", redis.EvictionCheckParam, err)
	}
}

// Issue 9 item 7 as reported: under allkeys-lru with memory full, the term
// counter is evicted. A store told to skip the check must still never hand
// out a term it has already handed out.
func TestTermsNeverGoBackAfterEviction(t *testing.T) {
	srv := testserver.Redis(t, false, "--maxmemory-policy", "allkeys-lru", "--maxmemory", "3mb")
	st := open(t, srv.URL(0)+"?"+redis.EvictionCheckParam+"=skip")
	c := client(t, srv)
	key := randomKey()
	var last uint64
	for range 5 {
		l, err := st.Acquire(ctxFor(t), key, "alpha", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		last = l.Term
		if err := st.Release(ctxFor(t), l); err != nil {
			t.Fatal(err)
		}
	}
	termKey := recordKey(key, "term")
	filler := strings.Repeat("x", 4096)
	for i := 0; ; i++ {
		n, err := c.Exists(ctxFor(t), termKey).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if i > 20000 {
			t.Fatal("the term counter was never evicted")
		}
		p := c.Pipeline()
		for j := range 50 {
			p.Set(ctxFor(t), fmt.Sprintf("filler-%d-%d", i, j), filler, 0)
		}
		if _, err := p.Exec(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := st.Acquire(ctxFor(t), key, "alpha", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Term <= last {
		t.Fatalf("after the term counter was evicted the store granted term %d, not above %d", l.Term, last)
	}
	if st.TermRepairs() == 0 {
		t.Fatal("TermRepairs = 0 after a repair")
	}
}

// A term written with redis-cli beyond 2^53 (where the server's Lua
// scripts, which count in doubles, stop counting exactly) must never make
// the store grant a term not above one a handle saw, or the same term
// twice: it refuses to grant with an error instead.
func TestTermsBeyondExactLuaIntegers(t *testing.T) {
	srv := testserver.Redis(t, false)
	c := client(t, srv)
	const big = "9007199254740993" // 2^53+1
	t.Run("HolderTerm", func(t *testing.T) {
		a, b := open(t, srv.URL(0)), open(t, srv.URL(0))
		l, lease := heldKey(t, a)
		key := l.Key
		if err := c.HSet(ctxFor(t), lease, "term", big).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := b.Acquire(ctxFor(t), key, "beta", time.Second)
		var held *tenure.HeldError
		if !errors.As(err, &held) || strconv.FormatUint(held.Record.Term, 10) != big {
			t.Fatalf("Acquire of the tampered grant: %v, want held at term %s", err, big)
		}
		if err := c.Del(ctxFor(t), lease).Err(); err != nil {
			t.Fatal(err)
		}
		if l, err := b.Acquire(ctxFor(t), key, "beta", time.Second); err == nil && l.Term <= held.Record.Term {
			t.Fatalf("after seeing term %d the handle granted term %d", held.Record.Term, l.Term)
		}
	})
	t.Run("Counter", func(t *testing.T) {
		st := open(t, srv.URL(0))
		key := randomKey()
		if err := c.Set(ctxFor(t), recordKey(key, "term"), big, 0).Err(); err != nil {
			t.Fatal(err)
		}
		var last uint64
		for range 4 {
			l, err := st.Acquire(ctxFor(t), key, "alpha", time.Second)
			if err != nil {
				if errors.Is(err, tenure.ErrTermsExhausted) && strings.Contains(err.Error(), "2^53") {
					return // refused, naming the limit
				}
				t.Fatalf("Acquire: %v, want a grant or ErrTermsExhausted naming the limit 2^53", err)
			}
			if l.Term <= last {
				t.Fatalf("granted term %d after term %d", l.Term, last)
			}
			last = l.Term
			if err := st.Release(ctxFor(t), l); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A lease hash rewritten with redis-cli so that it no longer decodes (a
// term that is not a number, beside a holder of several MiB) gives an
// error of one short line, without the raw bytes or the password.
func TestUndecodableRecordError(t *testing.T) {
	srv := testserver.Redis(t, false)
	st := open(t, srv.URL(0))
	l, lease := heldKey(t, st)
	huge := strings.Repeat("h", 4<<20)
	if err := client(t, srv).HSet(ctxFor(t), lease, "term", "1\n\x1b[2J", "holder", huge).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := st.Get(ctxFor(t), l.Key)
	if err == nil {
		t.Fatal("Get of an undecodable record succeeded")
	}
	if msg := err.Error(); len(msg) > 1024 || strings.ContainsAny(msg, "\n\x1b") || strings.Contains(msg, srv.Password) {
		t.Fatalf("Get's error is %d bytes, spans lines, holds raw escapes or the password: %.300q", len(msg), msg)
	}
}

// A grant whose ttl_ms is rewritten with redis-cli to -1: PEXPIRE with a
// negative time deletes the key, so a Renew that used it would delete the
// grant it was renewing and report success; one too large for PEXPIRE made
// the script fail with the server's "ERR value is not an integer". Renew
// reports the grant lost instead.
func TestRenewWithForgedTTL(t *testing.T) {
	srv := testserver.Redis(t, false)
	c := client(t, srv)
	for _, ttl := range []string{"-1", "0", "0.5", "abc", "1e20", "inf", "nan"} {
		st, l := heldForged(t, srv, func(_ *redis.Store, _ tenure.Lease, lease string) error {
			return c.HSet(ctxFor(t), lease, "ttl_ms", ttl).Err()
		})
		storetest.Tampered(t, "Renew with ttl_ms "+ttl, st.Renew(ctxFor(t), l), l.Key, tenure.ErrLost, rawRedis...)
	}
}

// A lease hash whose holder is set to "" with redis-cli still blocks
// Acquire; Get and Acquire's refusal must both show the key held, by
// "(unknown)" as on etcd and ZooKeeper, not Get free and Acquire held
// by "".
func TestEmptyHolderReadsHeld(t *testing.T) {
	srv := testserver.Redis(t, false)
	st := open(t, srv.URL(0))
	l, lease := heldKey(t, st)
	key := l.Key
	if err := client(t, srv).HSet(ctxFor(t), lease, "holder", "").Err(); err != nil {
		t.Fatal(err)
	}
	r, err := st.Get(ctxFor(t), key)
	if err != nil || r.Holder != "(unknown)" {
		t.Errorf("Get = %+v, %v; want held by (unknown)", r, err)
	}
	_, err = st.Acquire(ctxFor(t), key, "beta", time.Second)
	var held *tenure.HeldError
	if !errors.As(err, &held) || held.Record.Holder != "(unknown)" {
		t.Errorf("Acquire: %v, want held by (unknown)", err)
	}
}

// A last-grant record whose expiry was cleared or overwritten with
// redis-cli, after its grant's lease hash was deleted (so its holder may
// still be running): the next Acquire grants with a wait of a whole TTL,
// as for a lost record. It used to fail with the server's raw script
// error ("attempt to compare nil with number").
func TestForgedLastExpiry(t *testing.T) {
	srv := testserver.Redis(t, false)
	st := open(t, srv.URL(0))
	c := client(t, srv)
	for _, forged := range []string{"soon", "", "delete", "nan", "inf", "1e300", "99999999999999999"} {
		l, lease := heldKey(t, st)
		last := recordKey(l.Key, "last")
		var err error
		if forged == "delete" {
			err = c.HDel(ctxFor(t), last, "exp_ms").Err()
		} else {
			err = c.HSet(ctxFor(t), last, "exp_ms", forged).Err()
		}
		if err == nil {
			err = c.Del(ctxFor(t), lease).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
		l2, err := st.Acquire(ctxFor(t), l.Key, "beta", 10*time.Second)
		if err != nil {
			t.Fatalf("exp_ms %q: Acquire: %v", forged, err)
		}
		if l2.Term <= l.Term || l2.Wait < 10*time.Second {
			t.Errorf("exp_ms %q: granted term %d with Wait %v; want a term above %d and a wait of the whole TTL, 10s",
				forged, l2.Term, l2.Wait, l.Term)
		}
	}
}

// TestSessionTermsExhausted: a key whose term counter or last grant's term
// was set with redis-cli past 2^53-1, to something that is not a number,
// or to a value of another type, is refused by a session's Acquire and
// AcquireBatch with an error matching tenure.ErrTermsExhausted that names
// the key and the limit; the other keys of the batch are granted.
func TestSessionTermsExhausted(t *testing.T) {
	srv := testserver.Redis(t, false)
	c := client(t, srv)
	forgeries := map[string]func(key string) error{
		"CounterPast2^53":   func(key string) error { return c.Set(ctxFor(t), recordKey(key, "term"), "9007199254740993", 0).Err() },
		"CounterNotANumber": func(key string) error { return c.Set(ctxFor(t), recordKey(key, "term"), "x", 0).Err() },
		"CounterAHash": func(key string) error {
			if err := c.Del(ctxFor(t), recordKey(key, "term")).Err(); err != nil {
				return err
			}
			return c.HSet(ctxFor(t), recordKey(key, "term"), "term", "7").Err()
		},
		"LastTermPast2^53": func(key string) error {
			return c.HSet(ctxFor(t), recordKey(key, "last"), "term", "9007199254740993").Err()
		},
		"LastTermNotANumber": func(key string) error { return c.HSet(ctxFor(t), recordKey(key, "last"), "term", "x").Err() },
		"LastAString":        func(key string) error { return c.Set(ctxFor(t), recordKey(key, "last"), "9007199254740993", 0).Err() },
	}
	for name, forge := range forgeries {
		t.Run(name, func(t *testing.T) {
			for _, held := range []bool{false, true} {
				key := randomKey()
				st := open(t, srv.URL(0))
				l, err := st.Acquire(ctxFor(t), key, "alpha", 10*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if !held {
					if err := st.Release(ctxFor(t), l); err != nil {
						t.Fatal(err)
					}
				}
				if err := forge(key); err != nil {
					t.Fatal(err)
				}
				if held { // the holder's grant is deleted with redis-cli, as for a stuck lock
					if err := c.Del(ctxFor(t), recordKey(key, "lease")).Err(); err != nil {
						t.Fatal(err)
					}
				}
				storetest.SessionRefusesExhausted(t, func() tenure.StoreSession {
					return storetest.OpenSession(t, open(t, srv.URL(0)), 10*time.Second)
				}, key, "2^53")
			}
		})
	}
}

// rawRedis are fragments of the server's own errors, which a tampered
// record must not surface as they are.
var rawRedis = []string{"WRONGTYPE", "user_script", "ERR "}

// A key whose Redis keys were replaced with redis-cli by values of
// another type (a string or list where the lease hash is, a hash where the
// term counter is): the holder's Renew and Release report the grant lost,
// and Get, Watch and Acquire fail with one line naming the key and the
// record, not the server's WRONGTYPE. A last-grant record of another type
// does not stop the holder renewing or releasing the grant it still holds.
func TestWrongTypeRecords(t *testing.T) {
	srv := testserver.Redis(t, false)
	c := client(t, srv)
	retype := func(t *testing.T, name string, cmd ...any) {
		t.Helper()
		if err := c.Del(ctxFor(t), name).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctxFor(t), cmd...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, lease := range [][]any{{"SET", "", "garbage"}, {"RPUSH", "", "x"}} {
		t.Run("Lease"+lease[0].(string), func(t *testing.T) {
			a, b := open(t, srv.URL(0)), open(t, srv.URL(0))
			l, name := heldKey(t, a)
			lease[1] = name
			retype(t, name, lease...)
			storetest.Tampered(t, "Renew", a.Renew(ctxFor(t), l), l.Key, tenure.ErrLost, rawRedis...)
			storetest.Tampered(t, "Release", a.Release(ctxFor(t), l), l.Key, tenure.ErrLost, rawRedis...)
			_, err := b.Get(ctxFor(t), l.Key)
			storetest.Tampered(t, "Get", err, l.Key, nil, rawRedis...)
			_, err = b.Acquire(ctxFor(t), l.Key, "beta", time.Second)
			storetest.Tampered(t, "Acquire", err, l.Key, nil, rawRedis...)
			ch, err := b.Watch(ctxFor(t), l.Key)
			if err != nil {
				t.Fatal(err)
			}
			for r := range ch {
				t.Fatalf("Watch delivered %+v for a lease record of another type", r)
			}
		})
	}
	t.Run("TermHash", func(t *testing.T) {
		st := open(t, srv.URL(0))
		l, _ := heldKey(t, st)
		if err := st.Release(ctxFor(t), l); err != nil {
			t.Fatal(err)
		}
		retype(t, recordKey(l.Key, "term"), "HSET", recordKey(l.Key, "term"), "term", "7")
		_, err := st.Get(ctxFor(t), l.Key)
		storetest.Tampered(t, "Get", err, l.Key, nil, rawRedis...)
	})
	t.Run("LastString", func(t *testing.T) {
		st := open(t, srv.URL(0))
		l, _ := heldKey(t, st)
		retype(t, recordKey(l.Key, "last"), "SET", recordKey(l.Key, "last"), "x")
		if err := st.Renew(ctxFor(t), l); err != nil {
			t.Fatalf("Renew of a grant whose last-grant record is a string: %v", err)
		}
		if err := st.Release(ctxFor(t), l); err != nil {
			t.Fatalf("Release of a grant whose last-grant record is a string: %v", err)
		}
	})
}

// A term counter set with redis-cli to a number Redis's INCR cannot count
// from (a fraction, NaN, infinity, hexadecimal) makes Acquire fail with
// ErrTermsExhausted naming the key, as one that is not a number does, not
// with the server's "ERR value is not an integer" from inside the script.
func TestCounterNotAnInteger(t *testing.T) {
	srv := testserver.Redis(t, false)
	c := client(t, srv)
	for _, forged := range []string{"3.5", "nan", "-inf", "inf", "0x10", " 7", "1e3"} {
		_, l := heldForged(t, srv, func(st *redis.Store, l tenure.Lease, _ string) error {
			if err := st.Release(ctxFor(t), l); err != nil {
				return err
			}
			return c.Set(ctxFor(t), recordKey(l.Key, "term"), forged, 0).Err()
		})
		_, err := open(t, srv.URL(0)).Acquire(ctxFor(t), l.Key, "beta", time.Second)
		storetest.Tampered(t, "Acquire with the counter "+forged, err, l.Key, tenure.ErrTermsExhausted, rawRedis...)
	}
}

// A lease hash whose expiry was removed (PERSIST) or pushed years ahead
// (PEXPIRE) with redis-cli would, once its holder stopped renewing, keep
// the key held for ever (or for years). The next Acquire that finds it
// gives it back its own TTL, the most a renewal could have set; Get
// reports no more than that left.
func TestForgedLeaseExpiry(t *testing.T) {
	srv := testserver.Redis(t, false)
	c := client(t, srv)
	for _, forge := range [][]any{{"PERSIST"}, {"PEXPIRE", int64(1e12)}} {
		st, l := heldForged(t, srv, func(_ *redis.Store, _ tenure.Lease, lease string) error {
			return c.Do(ctxFor(t), append([]any{forge[0], lease}, forge[1:]...)...).Err()
		})
		lease := recordKey(l.Key, "lease")
		b := open(t, srv.URL(0))
		_, err := b.Acquire(ctxFor(t), l.Key, "beta", time.Second)
		var held *tenure.HeldError
		if !errors.As(err, &held) || held.Record.Remaining <= 0 || held.Record.Remaining > l.TTL {
			t.Fatalf("%v: Acquire: %v; want held with at most the grant's TTL %s left", forge[0], err, l.TTL)
		}
		if left, err := c.PTTL(ctxFor(t), lease).Result(); err != nil || left <= 0 || left > l.TTL {
			t.Fatalf("%v: after a refused Acquire the lease key's PTTL is %s, %v; want at most the grant's TTL %s", forge[0], left, err, l.TTL)
		}
		if r, err := st.Get(ctxFor(t), l.Key); err != nil || r.Remaining <= 0 || r.Remaining > l.TTL {
			t.Fatalf("%v: Get = %+v, %v; want at most the grant's TTL %s left", forge[0], r, err, l.TTL)
		}
	}
}

// A session's key overwritten with redis-cli as a string ends the session
// as its deletion does: KeepAlive and a later Acquire in it report
// ErrLost, not the server's WRONGTYPE (which the session would have
// retried until its deadline).
func TestSessionKeyOfAnotherType(t *testing.T) {
	srv := testserver.Redis(t, false)
	c := client(t, srv)
	st := open(t, srv.URL(0))
	ss := storetest.OpenSession(t, st, 10*time.Second)
	storetest.AcquireIn(t, ss, randomKey(), "alpha", "")
	keys, err := c.Keys(ctxFor(t), redis.DefaultPrefix+":session:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var session string
	for _, k := range keys {
		if !strings.HasSuffix(k, ":exp") {
			session = k
		}
	}
	if err := c.Set(ctxFor(t), session, "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.KeepAlive(ctxFor(t)); !errors.Is(err, tenure.ErrLost) || strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("KeepAlive after the session's key became a string: %v; want ErrLost", err)
	}
	key := randomKey()
	_, err = ss.Acquire(ctxFor(t), key, "alpha", "")
	storetest.Tampered(t, "session Acquire after the session's key became a string", err, key, tenure.ErrLost, rawRedis...)
}

// recordKey is the Redis key of key's record what ("lease", "term",
// "last") under the default prefix, as redis-cli would name it.
func recordKey(key, what string) string { return redis.DefaultPrefix + ":{" + key + "}:" + what }

// TestObserverFollowsAfterAForgedHigherTerm: the term of a held key
// rewritten far above the key's counter (HSET term), then the lease
// deleted and the key granted again at the counter's next term. An
// Observer that had delivered the forged term used to drop every later
// record as older news, for good (a tenure watch --exec hook would never
// run again); it now delivers the new grant once only older terms were
// shown for a TTL of the last record it delivered (DefaultTTL here, as
// that record is the free one after the deletion; twice, as the store's
// watch and the Observer each wait it out), about 30 s.
func TestObserverFollowsAfterAForgedHigherTerm(t *testing.T) {
	t.Parallel()
	srv := testserver.Redis(t, false)
	c := client(t, srv)
	ctx := ctxFor(t)
	key, ttl := randomKey(), time.Second
	if _, err := open(t, srv.URL(0)).Acquire(ctx, key, "alpha", ttl); err != nil {
		t.Fatal(err)
	}
	o := &tenure.Observer{Store: open(t, srv.URL(0)), Key: key, Poll: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	octx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ch := o.Changes(octx)
	next := func(what string, ok func(tenure.Record) bool) tenure.Record {
		t.Helper()
		limit := time.After(2 * time.Minute)
		var seen []tenure.Record
		for {
			select {
			case r, open := <-ch:
				if !open {
					t.Fatalf("the observer ended before it delivered %s; it delivered %+v", what, seen)
				}
				if ok(r) {
					return r
				}
				seen = append(seen, r)
			case <-limit:
				t.Fatalf("the observer never delivered %s within a minute; it delivered %+v", what, seen)
			}
		}
	}
	next("alpha's grant", func(r tenure.Record) bool { return r.Holder == "alpha" })
	lease := recordKey(key, "lease")
	if err := c.HSet(ctx, lease, "term", "1000000").Err(); err != nil {
		t.Fatal(err)
	}
	next("the forged term", func(r tenure.Record) bool { return r.Term == 1000000 })
	if err := c.Del(ctx, lease).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := open(t, srv.URL(0)).Acquire(ctx, key, "beta", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.Term >= 1000000 {
		t.Fatalf("beta's term %d: want the counter's, below the forged one", l.Term)
	}
	next("beta's grant after the forged term", func(r tenure.Record) bool { return r.Holder == "beta" && r.Term == l.Term })
}
