package tenure

import (
	"context"
	"log/slog"
	"strings"
	"time"
)

// A preferred holder is set on the key, as a Kubernetes Lease's
// preferredHolder is: a grant of the key's preference key ([PreferKey])
// whose published value names the candidate and the delay. While it is
// live, electors with [Config.Control] treat the named candidate as the
// best: its leader hands over to it (as [RequestStepDown] does, window one
// TTL) once it has seen it registered for the delay without a break, and
// when the key is free the named candidate goes first and the others hold
// back one step. A candidate of priority [NeverLead] is never handed the
// key. [Prefer] holds the grant for as long as its context lives, so the
// preference ends with the process that set it, on every store alike.

// PreferSuffix is appended to a key to name its preference key. A key
// ending in it (after at least one byte) is reserved (see [BaseKey]).
const PreferSuffix = "~tenure-prefer"

// PreferKey returns the preference key of key: key + [PreferSuffix].
func PreferKey(key string) string { return key + PreferSuffix }

// Preference names a key's preferred holder (see [Prefer]).
type Preference struct {
	// Holder is the identity of the preferred candidate. Required.
	Holder string
	// Delay is how long the leader must have seen Holder registered as a
	// candidate, without a break, before it hands over: so that a
	// flapping node does not bounce leadership. It counts from the
	// leader's first read that shows Holder (it reads the candidates about
	// once per TTL), so the hand-over comes up to about two TTLs after
	// Delay, counted from Holder's registration. Default one TTL of the
	// leader.
	Delay time.Duration
	// Logger receives the logs of the elector that holds the preference
	// for [Prefer] (its grant, renewals and release). It is not stored:
	// [ReadPreference] leaves it nil. Default [slog.Default].
	Logger *slog.Logger
}

// preferPrefix starts the value of a preference grant.
const preferPrefix = "prefer"

func encodePreference(p Preference) string {
	return preferPrefix + " " + p.Delay.String() + " " + p.Holder
}

// parsePreference decodes r, a record of a preference key; ok is false
// when it holds no live preference.
func parsePreference(r Record) (p Preference, ok bool) {
	if !r.Held() {
		return p, false
	}
	parts := strings.SplitN(r.Value, " ", 3)
	if len(parts) != 3 || parts[0] != preferPrefix || parts[2] == "" {
		return p, false
	}
	d, err := time.ParseDuration(parts[1])
	if err != nil || d < 0 {
		return p, false
	}
	return Preference{Holder: parts[2], Delay: d}, true
}

// ReadPreference returns the live preference set on key, if any; ok is
// false when there is none. It blocks for one store request. A derived
// key ([BaseKey]) has no preference of its own: ReadPreference refuses
// it, before reading anything, with an error wrapping [ErrInvalid] that
// names its base key. (A plain [Reader.Get] of [PreferKey] shows the raw
// record.)
func ReadPreference(ctx context.Context, r Reader, key string) (p Preference, ok bool, err error) {
	if err := checkContext(ctx, "ReadPreference"); err != nil {
		return p, false, err
	}
	if err := checkStore(r, "ReadPreference"); err != nil {
		return p, false, err
	}
	if err := checkNotDerived("key", key); err != nil {
		return p, false, err
	}
	rec, err := r.Get(ctx, PreferKey(key))
	if err != nil {
		return p, false, err
	}
	p, ok = parsePreference(rec)
	return p, ok, nil
}

// Prefer sets p as the preferred holder of key, as issuer, and keeps it
// set until ctx is done; then it clears it and returns ctx's error. Set
// while another preference of key is live, it waits for that one to end
// (one preference at a time). The preference is a grant on s renewed by
// an [Elector] (ttl, at least [MinTTL], is its TTL): if this process
// stops, it lapses within ttl. It returns at once, with an error wrapping
// [ErrInvalid], for bad arguments or a store that cannot publish values.
// Blocking; safe for concurrent use (for different keys).
func Prefer(ctx context.Context, s Store, key, issuer string, ttl time.Duration, p Preference) error {
	if err := checkContext(ctx, "Prefer"); err != nil {
		return err
	}
	if err := checkStore(s, "Prefer"); err != nil {
		return err
	}
	if err := checkName("Prefer's issuer", issuer, MaxIdentityLen); err != nil {
		return err
	}
	if lo, hi := TTLBounds(s); ttl < lo || ttl > hi {
		return invalidf("Prefer's ttl (%s) must be from %s to %s%s", ttl, lo, hi, forStore(s))
	}
	if err := checkControlledKey(key); err != nil {
		return err
	}
	if err := checkName("preferred holder", p.Holder, MaxIdentityLen); err != nil {
		return err
	}
	if p.Delay < 0 || p.Delay > MaxTTL {
		return invalidf("preference delay %s must be from 0 to %s", p.Delay, MaxTTL)
	}
	// The preference key is reserved: New would refuse it.
	e, err := newElector(Config{Store: s, Key: PreferKey(key), Identity: issuer, TTL: ttl, Value: encodePreference(p), Logger: p.Logger}, true)
	if err != nil {
		return err
	}
	return e.Run(ctx, func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	})
}
