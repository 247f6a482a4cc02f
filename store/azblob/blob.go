package azblob

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
	"github.com/tenurehq/tenure"
)

// Blob metadata names. Azure returns metadata names in whatever case the
// HTTP stack produced, so they are looked up case-insensitively.
const (
	metaKey    = "tenurekey"    // the key, path-escaped (for people browsing the container)
	metaHolder = "tenureholder" // the holder's identity, path-escaped; absent when released
	metaTerm   = "tenureterm"   // the term of the last grant, decimal
	metaTTL    = "tenurettl"    // the last grant's TTL in seconds; absent when released
	// metaValue is the value published with the grant, path-escaped (a
	// metadata value is an HTTP header value: ASCII, no edge spaces);
	// absent when released or when none was published.
	metaValue = "tenurevalue"
	// metaFormat is the metadata's format, blobFormat; absent in blobs
	// written before it, which read as that format.
	metaFormat = "tenureformat"
)

// blobFormat is the format of the metadata this build writes, and the
// only one it reads. A change that older builds would misread (the term
// under another name, a field given another meaning) must write another
// format: builds from this one on then refuse the blob, in an error
// naming the key and the format, instead of reading a term of 0 or a
// holder that is not one. Builds before it never check it, so such a
// change must still hold the blob's Azure lease while a grant lives.
const blobFormat = "1"

// checkContainer applies Azure's container naming rules.
func checkContainer(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: azblob: container name %q %s (3–63 lowercase letters, digits and single hyphens, starting and ending with a letter or digit)",
			tenure.ErrInvalid, name, why)
	}
	if len(name) < 3 || len(name) > 63 {
		return bad("has the wrong length")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '-' && i > 0 && i < len(name)-1 && name[i-1] != '-':
		default:
			return bad("is not valid")
		}
	}
	return nil
}

// checkPrefix accepts blob name prefixes that Azure stores as given.
func checkPrefix(p string) error {
	if len(p) > 255 {
		return fmt.Errorf("%w: azblob: prefix is %d bytes, longer than 255", tenure.ErrInvalid, len(p))
	}
	if p == "" {
		return nil
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.HasSuffix(seg, ".") {
			return fmt.Errorf("%w: azblob: prefix %q has an empty, dot or dot-ending segment", tenure.ErrInvalid, p)
		}
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return fmt.Errorf("%w: azblob: prefix %q contains %U", tenure.ErrInvalid, p, r)
		}
	}
	return nil
}

// blobName maps a key to a blob name: letters, digits, '-' and '_' stay,
// every other byte becomes "~XX" (hex). The mapping is one-to-one and the
// result is at most 768 bytes, so with a 255-byte prefix it stays within
// Azure's 1024 limit; no name has "." or "/" segments Azure would normalize.
func blobName(prefix, key string) string {
	var b strings.Builder
	if prefix != "" {
		b.WriteString(prefix)
		b.WriteByte('/')
	}
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(key); i++ {
		c := key[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('~')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// state is what the blob's properties say about a key.
type state struct {
	exists bool
	locked bool // a lease is live (leased, or breaking)
	broken bool // the last lease was broken (from outside: tenure never breaks one)
	holder string
	value  string // published with the grant
	term   uint64
	ttl    time.Duration
	etag   azcore.ETag
}

func metaGet(m map[string]*string, name string) string {
	for k, v := range m {
		if v != nil && strings.EqualFold(k, name) {
			return *v
		}
	}
	return ""
}

// errMetadata is wrapped by the error of metadata that does not read as
// tenure's: written by something else, since Azure lets nobody write the
// metadata of a blob tenure holds a lease on without its lease ID.
var errMetadata = errors.New("blob metadata")

// stateOf reads a state from blob properties. It fails on metadata it
// cannot parse rather than guess a term, which could make terms go back.
func stateOf(p blob.GetPropertiesResponse) (state, error) {
	st := state{exists: true}
	if p.ETag != nil {
		st.etag = *p.ETag
	}
	st.locked = p.LeaseStatus != nil && *p.LeaseStatus == lease.StatusTypeLocked
	st.broken = p.LeaseState != nil && *p.LeaseState == lease.StateTypeBroken
	if v := metaGet(p.Metadata, metaFormat); v != "" && v != blobFormat {
		return state{}, fmt.Errorf("%w %s=%.64q, this build reads format %s (written by a newer tenure?): not taken for a free key or a term",
			errMetadata, metaFormat, v, blobFormat)
	}
	if v := metaGet(p.Metadata, metaTerm); v != "" {
		t, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return state{}, fmt.Errorf("%w %s=%.64q is not a term", errMetadata, metaTerm, v)
		}
		st.term = t
	}
	if v := metaGet(p.Metadata, metaHolder); v != "" {
		h, err := url.PathUnescape(v)
		if err != nil {
			return state{}, fmt.Errorf("%w %s=%.64q is not path-escaped", errMetadata, metaHolder, v)
		}
		st.holder = h
	}
	if v := metaGet(p.Metadata, metaValue); v != "" {
		val, err := url.PathUnescape(v)
		if err != nil {
			return state{}, fmt.Errorf("%w %s is not path-escaped", errMetadata, metaValue)
		}
		st.value = val
	}
	if v := metaGet(p.Metadata, metaTTL); v != "" {
		secs, err := strconv.Atoi(v)
		if err != nil || secs < 0 || secs > math.MaxInt64/int(time.Second) {
			return state{}, fmt.Errorf("%w %s=%.64q is not a TTL", errMetadata, metaTTL, v)
		}
		st.ttl = time.Duration(secs) * time.Second
	}
	return st, nil
}

// record turns a state into a tenure.Record. Azure does not tell how long a
// lease has left, so a live grant's Remaining is its TTL: an upper bound.
// A live lease whose metadata names nobody (a grant whose metadata write has
// not landed yet, or a lease taken outside tenure) has no Holder.
func (st state) record(key string) tenure.Record {
	r := tenure.Record{Key: key, Term: st.term}
	if st.locked && st.holder != "" {
		r.Holder, r.TTL, r.Remaining, r.Value = st.holder, st.ttl, st.ttl, st.value
	}
	return r
}

// owns returns nil if st shows l as the key's live grant, or an error
// matching tenure.ErrLost saying why not.
func (st state) owns(l tenure.Lease) error {
	switch {
	case !st.exists:
		return fmt.Errorf("%w: azblob: key %q has no blob", tenure.ErrLost, l.Key)
	case !st.locked:
		return fmt.Errorf("%w: azblob: the lease on key %q (term %d) expired or was released", tenure.ErrLost, l.Key, l.Term)
	case st.holder != l.Identity || st.term != l.Term:
		return fmt.Errorf("%w: azblob: key %q is held by %q with term %d, not by %q with term %d",
			tenure.ErrLost, l.Key, st.holder, st.term, l.Identity, l.Term)
	}
	return nil
}

// grantMeta is the metadata of a live grant.
func grantMeta(key, identity string, term uint64, ttl time.Duration, value string) map[string]*string {
	m := map[string]*string{
		metaFormat: ptr(blobFormat),
		metaKey:    ptr(url.PathEscape(key)),
		metaHolder: ptr(url.PathEscape(identity)),
		metaTerm:   ptr(strconv.FormatUint(term, 10)),
		metaTTL:    ptr(strconv.Itoa(int(ttl / time.Second))),
	}
	if value != "" {
		m[metaValue] = ptr(url.PathEscape(value))
	}
	return m
}

// releasedMeta is the metadata of a released key: the term stays.
func releasedMeta(key string, term uint64) map[string]*string {
	return map[string]*string{
		metaFormat: ptr(blobFormat),
		metaKey:    ptr(url.PathEscape(key)),
		metaTerm:   ptr(strconv.FormatUint(term, 10)),
	}
}

func ptr[T any](v T) *T { return &v }
