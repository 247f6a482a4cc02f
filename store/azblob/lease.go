package azblob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
	"github.com/google/uuid"
	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/seen"
)

// acquireAttempts bounds how often Acquire re-reads a blob whose state
// changed under it before giving up with the last state it saw.
const acquireAttempts = 4

// abandonTimeout bounds the release of a lease whose grant could not be
// completed, which runs even if the caller's context is done.
const abandonTimeout = 2 * time.Second

// Acquire implements [tenure.Store]. It reads the blob's properties; if a
// lease is live it returns a *[tenure.HeldError] naming the holder from the
// blob's metadata (Remaining is the grant's TTL, an upper bound: Azure does
// not report a lease's time left). Otherwise it acquires a blob lease with a
// new random lease ID (the Token), on the condition that the blob is
// unchanged since the read, and writes holder, TTL and term = previous term
// + 1 to the blob's metadata under that lease. If that write fails the
// lease is released (best effort, within 2 s even if ctx is done) and the
// error returned. The blob, and the container, are created if missing.
//
// ttl must be a whole number of seconds in [MinTTL, MaxTTL], else the error
// wraps [tenure.ErrInvalid]. It costs 1 request when the key is held, 3 when
// it is free (4–5 the first time a key is used).
func (s *Store) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	return s.AcquireClaim(ctx, key, tenure.Claim{Identity: identity, TTL: ttl})
}

// AcquireClaim implements [tenure.Publisher]: [Store.Acquire], writing
// c.Value (path-escaped) to the blob's metadata with the grant; Release
// removes it with the holder.
func (s *Store) AcquireClaim(ctx context.Context, key string, c tenure.Claim) (tenure.Lease, error) {
	if err := tenure.CheckClaim(key, c); err != nil {
		return tenure.Lease{}, err
	}
	identity, ttl := c.Identity, c.TTL
	if err := checkTTL(ttl); err != nil {
		return tenure.Lease{}, err
	}
	if err := s.check(ctx); err != nil {
		return tenure.Lease{}, err
	}
	name := blobName(s.prefix, key)
	b := s.container.NewBlobClient(name)
	floor := s.seen.Highest(key)
	sent := time.Now()
	var st state
	created := false
	for attempt := 0; attempt < acquireAttempts; attempt++ {
		var err error
		if st, err = s.props(ctx, key, name); err != nil {
			return tenure.Lease{}, err
		}
		if !st.exists {
			if err := s.create(ctx, name); err != nil {
				return tenure.Lease{}, err
			}
			created = true
			continue
		}
		if st.locked {
			r := st.record(key)
			s.seen.Observe(key, r.Term, r.TTL)
			return tenure.Lease{}, &tenure.HeldError{Record: r}
		}
		term, ok := seen.Next(st.term, floor.Term)
		if !ok {
			return tenure.Lease{}, fmt.Errorf("%w: azblob: blob %q in %s: term %d is the largest there is (was the metadata written by something else?)", tenure.ErrTermsExhausted, name, s.endpoint, max(st.term, floor.Term))
		}
		id := uuid.NewString()
		lc, err := lease.NewBlobClient(b, &lease.BlobClientOptions{LeaseID: &id})
		if err != nil {
			return tenure.Lease{}, s.wrap("prepare lease client for", name, err)
		}
		etag := st.etag
		_, err = lc.AcquireLease(ctx, int32(ttl/time.Second), &lease.BlobAcquireOptions{
			ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &etag},
		})
		if bloberror.HasCode(err, bloberror.LeaseAlreadyPresent, bloberror.ConditionNotMet,
			bloberror.LeaseIsBreakingAndCannotBeAcquired, bloberror.BlobNotFound) {
			continue // somebody else got there first, or the blob changed: read again
		}
		if err != nil {
			return tenure.Lease{}, s.wrap("acquire lease on", name, err)
		}
		l := tenure.Lease{Key: key, Identity: identity, Term: term, TTL: ttl, Token: id, Value: c.Value}
		switch {
		case st.broken && st.holder != "":
			// Broken from outside before its holder released it: the
			// holder may go on until its renew deadline.
			l.Wait = seen.WaitSince(sent, st.ttl)
		case created && floor.Term > 0:
			// The blob was deleted although this Store saw it granted.
			l.Wait = seen.WaitSince(sent, floor.TTL)
		}
		if err := s.writeGrant(ctx, name, l, etag); err != nil {
			s.abandon(ctx, lc)
			return tenure.Lease{}, err
		}
		s.seen.Observe(key, l.Term, ttl)
		return l, nil
	}
	return tenure.Lease{}, &tenure.HeldError{Record: st.record(key)}
}

// writeGrant records l in the blob's metadata, under l's lease and on the
// condition that the metadata is still the one l's term was computed from.
func (s *Store) writeGrant(ctx context.Context, name string, l tenure.Lease, etag azcore.ETag) error {
	_, err := s.container.NewBlobClient(name).SetMetadata(ctx, grantMeta(l.Key, l.Identity, l.Term, l.TTL, l.Value),
		&blob.SetMetadataOptions{AccessConditions: &blob.AccessConditions{
			LeaseAccessConditions:    &blob.LeaseAccessConditions{LeaseID: &l.Token},
			ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &etag},
		}})
	if bloberror.HasCode(err, bloberror.ConditionNotMet) {
		// An earlier try of this very request (an SDK retry) may have
		// landed: then the metadata already says what we meant to write.
		if st, perr := s.props(ctx, l.Key, name); perr == nil && st.locked && st.holder == l.Identity && st.term == l.Term {
			return nil
		}
	}
	if err != nil {
		return s.wrap("record the new term on", name, err)
	}
	return nil
}

// abandon releases a lease whose grant could not be completed. It runs even
// if ctx is done, for at most abandonTimeout: otherwise the key would stay
// locked, with stale metadata, for a whole TTL.
func (s *Store) abandon(ctx context.Context, lc *lease.BlobClient) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	_, _ = lc.ReleaseLease(rctx, nil)
}

// leaseClient returns the lease client of l, or an ErrLost error if l's
// token cannot be one of this store's lease IDs.
func (s *Store) leaseClient(name string, l tenure.Lease) (*lease.BlobClient, error) {
	if _, err := uuid.Parse(l.Token); err != nil {
		return nil, fmt.Errorf("%w: azblob: the lease of key %q has no lease ID of this store", tenure.ErrLost, l.Key)
	}
	id := l.Token
	lc, err := lease.NewBlobClient(s.container.NewBlobClient(name), &lease.BlobClientOptions{LeaseID: &id})
	if err != nil {
		return nil, s.wrap("prepare lease client for", name, err)
	}
	return lc, nil
}

// owned reads key l.Key's blob and checks that l is its live grant (see
// [state.owns]). It returns the blob's name, a lease client with l's lease
// ID, and the ETag of what it read, for the request that follows to be
// conditional on it.
func (s *Store) owned(ctx context.Context, l tenure.Lease) (string, *lease.BlobClient, azcore.ETag, error) {
	name := blobName(s.prefix, l.Key)
	lc, err := s.leaseClient(name, l)
	if err != nil {
		return "", nil, "", err
	}
	st, err := s.props(ctx, l.Key, name)
	if errors.Is(err, errMetadata) {
		return "", nil, "", fmt.Errorf("%w: %w", tenure.ErrLost, err)
	}
	if err != nil {
		return "", nil, "", err
	}
	if err := st.owns(l); err != nil {
		return "", nil, "", err
	}
	return name, lc, st.etag, nil
}

// Renew implements [tenure.Store]: it reads the blob's properties, checks
// that the lease is live and the metadata names l's holder and term, then
// renews the blob lease with l's lease ID on the condition that the
// metadata is unchanged since the read. 2 requests. An expired lease is not
// revived even though Azure would allow it: it returns an error matching
// [tenure.ErrLost], as after a takeover.
//
// Give ctx a deadline shorter than the time the lease has left (the elector
// does): the SDK's retries stay within it. Without a deadline, Renew is
// bounded by l.TTL, after which it could not matter any more.
func (s *Store) Renew(ctx context.Context, l tenure.Lease) error {
	if err := tenure.CheckKey(l.Key); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok && l.TTL > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.TTL)
		defer cancel()
	}
	name, lc, etag, err := s.owned(ctx, l)
	if err != nil {
		return err
	}
	_, err = lc.RenewLease(ctx, &lease.BlobRenewOptions{
		ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &etag},
	})
	if err != nil {
		return s.lost("renew lease on", name, err)
	}
	return nil
}

// Release implements [tenure.Store]: after the checks of Renew it removes
// the holder from the blob's metadata (keeping the term) under the lease,
// then releases the blob lease. 3 requests. If the last one fails the key
// stays locked, naming no holder, until the lease expires.
func (s *Store) Release(ctx context.Context, l tenure.Lease) error {
	if err := tenure.CheckKey(l.Key); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	name, lc, etag, err := s.owned(ctx, l)
	if err != nil {
		return err
	}
	_, err = s.container.NewBlobClient(name).SetMetadata(ctx, releasedMeta(l.Key, l.Term),
		&blob.SetMetadataOptions{AccessConditions: &blob.AccessConditions{
			LeaseAccessConditions:    &blob.LeaseAccessConditions{LeaseID: &l.Token},
			ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &etag},
		}})
	if err != nil {
		return s.lost("clear the holder of", name, err)
	}
	if _, err := lc.ReleaseLease(ctx, nil); err != nil {
		return s.lost("release lease on", name, err)
	}
	return nil
}

// Get implements [tenure.Store] with one read of the blob's properties. A
// live grant's Remaining is its TTL (Azure does not report a lease's time
// left). A key whose blob or container does not exist was never granted.
func (s *Store) Get(ctx context.Context, key string) (tenure.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return tenure.Record{}, err
	}
	st, err := s.props(ctx, key, blobName(s.prefix, key))
	if err != nil {
		return tenure.Record{}, err
	}
	return s.seen.Record(st.record(key)), nil
}

// props reads the state of blob name, key's; a missing blob or container
// is a state with exists false. Metadata that does not read is an error
// naming the key, wrapping errMetadata.
func (s *Store) props(ctx context.Context, key, name string) (state, error) {
	p, err := s.container.NewBlobClient(name).GetProperties(ctx, nil)
	if bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) {
		return state{}, nil
	}
	if err != nil {
		return state{}, s.wrap("read properties of", name, err)
	}
	st, err := stateOf(p)
	if err != nil {
		return state{}, fmt.Errorf("azblob: key %q: %w (blob %q in %s; was it written by something else?)", key, err, name, s.endpoint)
	}
	return st, nil
}

// create makes blob name, empty, unless it exists; and the container first
// if that is missing.
func (s *Store) create(ctx context.Context, name string) error {
	upload := func() error {
		_, err := s.container.NewBlockBlobClient(name).Upload(ctx, streaming.NopCloser(bytes.NewReader(nil)),
			&blockblob.UploadOptions{AccessConditions: &blob.AccessConditions{
				ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: ptr(azcore.ETagAny)},
			}})
		if bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet, bloberror.LeaseIDMissing) {
			return nil // created by someone else meanwhile
		}
		return err
	}
	err := upload()
	if bloberror.HasCode(err, bloberror.ContainerNotFound) {
		_, cerr := s.container.Create(ctx, nil)
		if cerr != nil && !bloberror.HasCode(cerr, bloberror.ContainerAlreadyExists) {
			return s.wrap("create container for", name, cerr)
		}
		err = upload()
	}
	if err != nil {
		return s.wrap("create blob", name, err)
	}
	return nil
}
