package azblob

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/storeurl"
)

// Environment variables that carry credentials for azblob:// URLs. They are
// the ones the Azure CLI and SDKs use.
const (
	// EnvConnectionString holds a full Azure Storage connection string
	// (AccountName, AccountKey or SharedAccessSignature, and optionally
	// BlobEndpoint, DefaultEndpointsProtocol, EndpointSuffix).
	EnvConnectionString = "AZURE_STORAGE_CONNECTION_STRING"
	// EnvAccount names the storage account when no connection string is set.
	EnvAccount = "AZURE_STORAGE_ACCOUNT"
	// EnvKey is the account's shared key, used with EnvAccount.
	EnvKey = "AZURE_STORAGE_KEY"
	// EnvSAS is a shared access signature (query string, with or without the
	// leading "?"), used with EnvAccount when EnvKey is not set.
	EnvSAS = "AZURE_STORAGE_SAS_TOKEN"
)

func init() {
	tenure.Register("azblob", func(ctx context.Context, u *url.URL) (tenure.Store, error) {
		o, err := optionsFromURL(u, os.Getenv)
		if err != nil {
			return nil, err
		}
		return New(ctx, o)
	})
}

// Open opens the store named by an azblob:// URL, exactly as [tenure.Open]
// does once this package is imported:
//
//	azblob://[ACCOUNT[:KEY]@]CONTAINER[/PREFIX][?PARAMS]
//
// CONTAINER is the blob container holding one blob per key (created if
// missing); PREFIX, if given, is prepended to every blob name. Credentials
// come from, in order: a KEY in the URL (for tests and Azurite only: a key
// in a URL ends up in shell histories and process lists); the environment
// variable AZURE_STORAGE_CONNECTION_STRING; AZURE_STORAGE_ACCOUNT (or the
// URL's ACCOUNT) with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN. PARAMS:
//
//   - endpoint=URL: the blob service endpoint, such as
//     http://127.0.0.1:10000/devstoreaccount1 for Azurite. Default: the
//     connection string's BlobEndpoint, else https://ACCOUNT.blob.core.windows.net/.
//   - poll=DURATION: the watch polling interval (default 200ms, at least 10ms).
//   - retries=N: SDK retries of a failed request (default 2; 0 for none).
//   - try_timeout=DURATION: limit of one try of a request (default 10s).
//
// Errors never quote the key, the SAS or the connection string.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: azblob URL %q cannot be parsed", tenure.ErrInvalid, tenure.Redact(rawURL))
	}
	if u.Scheme != "azblob" {
		return nil, fmt.Errorf("%w: URL %q: scheme is not azblob", tenure.ErrInvalid, tenure.Redact(rawURL))
	}
	o, err := optionsFromURL(u, os.Getenv)
	if err != nil {
		return nil, err
	}
	return New(ctx, o)
}

// optionsFromURL turns an azblob URL and the environment into Options.
func optionsFromURL(u *url.URL, getenv func(string) string) (Options, error) {
	shown := tenure.Redact(storeurl.String(u))
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: azblob URL %q: "+format, append([]any{tenure.ErrInvalid, shown}, args...)...)
	}
	if u.Opaque != "" {
		return Options{}, invalid("want azblob://CONTAINER/PREFIX")
	}
	o := Options{Container: u.Host, Prefix: strings.Trim(u.Path, "/")}
	// Not u.Query(), which drops what it cannot parse ("poll=1s;x"), and
	// with it a parameter the operator gave.
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Options{}, invalid("the query cannot be parsed (a ';', or a bad %%-escape)")
	}
	for name, vals := range query {
		if len(vals) != 1 {
			return Options{}, invalid("parameter %q is given %d times", name, len(vals))
		}
		if msg := o.setParam(name, vals[0]); msg != "" {
			return Options{}, invalid("%s", msg)
		}
	}
	cs, err := o.setCredentials(u, getenv, invalid)
	if err != nil {
		return Options{}, err
	}
	if o.ServiceURL == "" {
		o.ServiceURL = cs.blobEndpoint
	}
	if o.ServiceURL == "" {
		if o.AccountName == "" {
			return Options{}, invalid("no account name: give it in the URL (azblob://ACCOUNT@CONTAINER), %s or %s",
				EnvAccount, EnvConnectionString)
		}
		proto, suffix := cs.protocol, cs.suffix
		if proto == "" {
			proto = "https"
		}
		if suffix == "" {
			suffix = "core.windows.net"
		}
		o.ServiceURL = fmt.Sprintf("%s://%s.blob.%s/", proto, o.AccountName, suffix)
	}
	return o, nil
}

// setParam sets the option a URL query parameter names. It returns what
// is wrong with the parameter, or "".
func (o *Options) setParam(name, v string) string {
	switch name {
	case "endpoint":
		o.ServiceURL = v
	case "poll":
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Millisecond {
			return fmt.Sprintf("poll=%q is not a duration of at least 10ms", v)
		}
		o.PollInterval = d
	case "retries":
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 10 {
			return fmt.Sprintf("retries=%q is not a number from 0 to 10", v)
		}
		o.MaxRetries = n
		if n == 0 {
			o.MaxRetries = -1
		}
	case "try_timeout":
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Sprintf("try_timeout=%q is not a positive duration", v)
		}
		o.TryTimeout = d
	default:
		return fmt.Sprintf("unknown parameter %q (known: endpoint, poll, retries, try_timeout)", name)
	}
	return ""
}

// setCredentials sets the account name, key and SAS from, in this order,
// the URL's user info, [EnvConnectionString], and [EnvAccount] with
// [EnvKey] or [EnvSAS]. It returns the connection string it used, if any,
// for its endpoint fields; invalid makes the error of a bad URL.
func (o *Options) setCredentials(u *url.URL, getenv func(string) string, invalid func(string, ...any) error) (connString, error) {
	account, key := "", ""
	if u.User != nil {
		account = u.User.Username()
		key, _ = u.User.Password()
	}
	var cs connString
	if key == "" {
		if raw := getenv(EnvConnectionString); raw != "" {
			var err error
			if cs, err = parseConnString(raw); err != nil {
				return cs, fmt.Errorf("%w: %s: %v", tenure.ErrInvalid, EnvConnectionString, err)
			}
			if account != "" && cs.account != "" && account != cs.account {
				return cs, invalid("account %q differs from the AccountName of %s", account, EnvConnectionString)
			}
			if cs.account != "" {
				account = cs.account
			}
			key = cs.key
		}
	}
	if account == "" {
		account = getenv(EnvAccount)
	}
	sas := cs.sas
	if key == "" && sas == "" {
		key = getenv(EnvKey)
		if key == "" {
			sas = getenv(EnvSAS)
		}
	}
	if key == "" && sas == "" {
		return cs, invalid("no credentials: set %s, or %s with %s or %s",
			EnvConnectionString, EnvAccount, EnvKey, EnvSAS)
	}
	o.AccountName, o.AccountKey, o.SAS = account, key, strings.TrimPrefix(sas, "?")
	return cs, nil
}

// connString is the part of an Azure Storage connection string this
// package uses.
type connString struct {
	account, key, sas, blobEndpoint, protocol, suffix string
}

// parseConnString parses "Name=value;Name=value;...". Its errors name the
// offending field but never quote a value.
func parseConnString(s string) (connString, error) {
	var c connString
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, value, ok := strings.Cut(part, "=")
		if !ok {
			return connString{}, fmt.Errorf("a field has no '=' (want Name=value;...)")
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "accountname":
			c.account = value
		case "accountkey":
			c.key = value
		case "sharedaccesssignature":
			c.sas = value
		case "blobendpoint":
			c.blobEndpoint = value
		case "defaultendpointsprotocol":
			c.protocol = value
		case "endpointsuffix":
			c.suffix = value
		case "usedevelopmentstorage":
			return connString{}, fmt.Errorf("UseDevelopmentStorage is not supported: give AccountName, AccountKey and BlobEndpoint")
		}
	}
	if c.key == "" && c.sas == "" {
		return connString{}, fmt.Errorf("neither AccountKey nor SharedAccessSignature is set")
	}
	if c.key != "" && c.account == "" {
		return connString{}, fmt.Errorf("AccountKey is set without AccountName")
	}
	return c, nil
}
