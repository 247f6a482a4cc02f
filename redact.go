package tenure

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// redactMark replaces every secret Redact hides.
const redactMark = "xxxxx"

// unparseable stands for a whole string Redact could not take apart.
const unparseable = "<unparseable URL>"

// secretNames are substrings of parameter names whose values Redact hides,
// matched case-insensitively: password, passwd, sslpassword, passphrase,
// pwd, secret, token, auth_token, key, accountkey, apikey, sig (a SAS's
// signature), sas, connection strings, credentials.
var secretNames = []string{"pass", "pwd", "secret", "token", "key", "sig", "sas", "auth", "cred", "connection_string", "connectionstring", "private"}

// accountSchemes are the URL schemes whose userinfo without a password is an
// account name rather than a credential: Redact shows it. For every other
// scheme (redis://TOKEN@host puts a token there) a user without a password
// is hidden too.
var accountSchemes = map[string]bool{
	"postgres": true, "postgresql": true, "etcd": true, "zk": true, "azblob": true,
}

// isSecretName reports whether a parameter called name carries a secret.
func isSecretName(name string) bool {
	n := strings.ToLower(name)
	if u, err := url.QueryUnescape(n); err == nil {
		n = u
	}
	for _, s := range secretNames {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// Redact returns s, a store URL, with its secrets replaced by "xxxxx", for
// logs and errors. It hides:
//
//   - the password of the userinfo (scheme://user:xxxxx@host), and the user
//     too when there is no password, unless the scheme's user is an account
//     name (postgres, etcd, zk, azblob): redis://TOKEN@host becomes
//     redis://xxxxx@host;
//   - the value of every query or fragment parameter whose name looks
//     secret (password, sslpassword, secret, token, key, accountkey, sig,
//     auth...), and secrets in URLs or name=value lists nested in other
//     parameters' values;
//   - secret values in a string that is not a URL but a keyword/value list,
//     such as a libpq connection string "host=db password=xxxxx" or an Azure
//     connection string "AccountName=a;AccountKey=xxxxx";
//   - the opaque part of scheme:opaque when it could hold a credential.
//
// Anything else it cannot take apart is replaced whole by
// "<unparseable URL>". Redact never panics.
func Redact(s string) string { return redact(s, 0) }

// maxRedactDepth bounds the nesting redact follows into parameter values.
const maxRedactDepth = 3

func redact(s string, depth int) string {
	if depth > maxRedactDepth {
		return redactMark
	}
	u, err := url.Parse(s)
	switch {
	case err == nil && (u.Scheme != "" || u.User != nil || u.Host != ""),
		err == nil && (u.RawQuery != "" || u.Fragment != "") && !strings.ContainsAny(u.Path, "= \t"):
		return redactURL(s, u, depth)
	case err != nil && startsWithScheme(s):
		return unparseable // a URL, broken: no telling where its secrets are
	case strings.Contains(s, "="):
		// A keyword/value list, or something no URL parser would take.
		return redactPairs(s, " \t\r\n\f\v;&,", true, depth)
	case err != nil:
		return unparseable
	case strings.Contains(s, "@"):
		// A path such as TOKEN@host: what precedes the last @ may be a
		// credential.
		return redactMark + s[strings.LastIndex(s, "@"):]
	}
	return s
}

func redactURL(raw string, u *url.URL, depth int) string {
	v := *u
	if v.User != nil {
		name := v.User.Username()
		pw, hasPW := v.User.Password()
		switch {
		case hasPW && (pw != "" || accountSchemes[strings.ToLower(v.Scheme)]):
			v.User = url.UserPassword(name, redactMark)
		case name != "" && !accountSchemes[strings.ToLower(v.Scheme)]:
			v.User = url.User(redactMark)
		}
	}
	if v.Opaque != "" && strings.ContainsAny(v.Opaque, "@=:%") {
		v.Opaque = redactMark
	}
	query, fragment := v.RawQuery, v.EscapedFragment()
	hasQuery, hasFragment := v.RawQuery != "" || v.ForceQuery, v.Fragment != ""
	v.RawQuery, v.ForceQuery, v.Fragment, v.RawFragment = "", false, "", ""
	out := v.String()
	if sep := v.Scheme + "://"; v.Scheme != "" && strings.HasPrefix(strings.ToLower(raw), strings.ToLower(sep)) && !strings.HasPrefix(out, sep) {
		out = sep + strings.TrimPrefix(out, v.Scheme+":") // peer://?... stays peer://?...
	}
	if hasQuery {
		out += "?" + redactPairs(query, "&;", false, depth)
	}
	if hasFragment {
		out += "#" + redactPairs(fragment, "&;", false, depth)
	}
	return out
}

// redactPairs hides the secrets of a list of name=value pairs separated by
// any of seps: the values of secret names, and secrets nested in other
// values. The rest of the text is kept as it was. kv selects libpq rules:
// spaces around '=', values in single quotes with backslash escapes.
func redactPairs(s, seps string, kv bool, depth int) string {
	var b strings.Builder
	i := 0
	for i < len(s) {
		// Separators are kept.
		if strings.IndexByte(seps, s[i]) >= 0 {
			b.WriteByte(s[i])
			i++
			continue
		}
		// The name runs to '=' or a separator.
		j := i
		for j < len(s) && s[j] != '=' && strings.IndexByte(seps, s[j]) < 0 {
			j++
		}
		name := s[i:j]
		secret := isSecretName(name)
		if kv && !plainName(name) {
			// Not a keyword: it may be a mangled user:password@host, and
			// its value anything.
			name, secret = redactMark, true
		}
		k := j
		if kv { // libpq allows spaces between the name, '=' and the value
			for k < len(s) && isSpace(s[k]) {
				k++
			}
		}
		if k >= len(s) || s[k] != '=' {
			// A word without '=': kept, up to the next separator.
			b.WriteString(name)
			i = j
			continue
		}
		k++ // '='
		if kv {
			for k < len(s) && isSpace(s[k]) {
				k++
			}
		}
		// The value runs to an unescaped separator, or to the closing quote.
		v := k
		if kv && v < len(s) && s[v] == '\'' {
			v++
			for v < len(s) && s[v] != '\'' {
				if s[v] == '\\' {
					v++
				}
				v++
			}
			v = min(v+1, len(s)) // the closing quote, if any
		} else {
			for v < len(s) && strings.IndexByte(seps, s[v]) < 0 {
				if kv && s[v] == '\\' {
					v++
				}
				v++
			}
			v = min(v, len(s))
		}
		b.WriteString(name)
		b.WriteString(s[j:k])
		val := s[k:v]
		switch {
		case secret:
			if val != "" {
				b.WriteString(redactMark)
			}
		default:
			b.WriteString(redactNested(val, kv, depth))
		}
		i = v
	}
	return b.String()
}

// redactNested hides secrets in a parameter value that is itself a URL or a
// name=value list, such as endpoint=https://host/?sig=...
func redactNested(val string, kv bool, depth int) string {
	plain := val
	if !kv {
		p, err := url.QueryUnescape(val)
		if err != nil {
			if strings.ContainsAny(val, "=@") {
				return redactMark
			}
			return val
		}
		plain = p
	}
	if !strings.ContainsAny(plain, "=@") {
		return val
	}
	r := redact(plain, depth+1)
	if r == plain {
		return val
	}
	if !kv {
		return url.QueryEscape(r)
	}
	return r
}

// startsWithScheme reports whether s starts with SCHEME://.
func startsWithScheme(s string) bool {
	i := strings.Index(s, "://")
	return i > 0 && isScheme(s[:i])
}

// isScheme reports whether s is a URL scheme url.Parse accepts: a letter,
// then letters, digits, + - and '.'.
func isScheme(s string) bool {
	for i, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// plainName reports whether name could be a keyword of a keyword/value
// list: letters, digits and _ . -.
func plainName(name string) bool {
	for _, c := range []byte(name) {
		if !isNameByte(c) {
			return false
		}
	}
	return true
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// quoted matches a Go-quoted string inside an error message.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// urlProblem says what is wrong with a string [url.Parse] refused, without
// quoting any of it: the parser's messages quote the offending part, which
// may be a password ("invalid port \":hunter2\" after host").
func urlProblem(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := quoted.ReplaceAllString(err.Error(), "")
	msg = strings.Join(strings.Fields(strings.TrimPrefix(msg, "net/url: ")), " ")
	if msg == "" {
		return "malformed"
	}
	return msg
}

// secretsOf returns the secrets Redact would hide in s, longest first, so
// errors can be scrubbed of them wherever they were quoted.
func secretsOf(s string) []string {
	var out []string
	red := Redact(s)
	if red == s {
		return nil
	}
	// Walk both strings: every run of s that Redact replaced by the mark is
	// a secret. A simple way that needs no second parser: split the redacted
	// form at the marks and find its pieces in order in s.
	pieces := strings.Split(red, redactMark)
	if red == unparseable || len(pieces) == 1 {
		return []string{s}
	}
	rest := s
	if !strings.HasPrefix(rest, pieces[0]) {
		return []string{s}
	}
	rest = rest[len(pieces[0]):]
	for _, p := range pieces[1:] {
		if p == "" {
			// The mark ends the string or two marks touch: the rest up to
			// the next piece is secret; without a next piece, all of it.
			continue
		}
		at := strings.Index(rest, p)
		if at < 0 {
			return []string{s}
		}
		if at > 0 {
			out = append(out, rest[:at])
		}
		rest = rest[at+len(p):]
	}
	if rest != "" {
		out = append(out, rest)
	}
	return out
}

// scrubbedError is an error whose message had secrets removed; it unwraps to
// the original, so errors.Is and errors.As still work.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// RedactError returns err with every secret of rawURL (what [Redact] hides)
// that its message quotes as a credential, raw or unescaped or escaped,
// replaced by "xxxxx" (see [RedactSecret] for where); errors.Is and
// errors.As see through it to err. Store packages use it on errors of
// drivers that quote the URL they were given. It returns err itself when
// there was nothing to hide, and nil for nil.
func RedactError(err error, rawURL string) error {
	if err == nil {
		return nil
	}
	token := userToken(rawURL)
	for _, s := range secretsOf(rawURL) {
		// A whole URL Redact could not take apart, or a token in the user
		// position, is hidden wherever it stands: the token is the
		// credential, and a driver may quote it as a user name.
		anywhere := s == rawURL || token != "" && (s == token || url.PathEscape(token) == s || url.QueryEscape(token) == s)
		err = redactSecret(err, s, anywhere)
	}
	return err
}

// userToken returns the user of rawURL's userinfo if Redact hides it: a
// user without a password, in a scheme whose user is not an account name.
func userToken(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil || accountSchemes[strings.ToLower(u.Scheme)] {
		return ""
	}
	if _, hasPW := u.User.Password(); hasPW {
		return ""
	}
	return u.User.Username()
}

// RedactSecret returns err with secret, raw or unescaped or escaped,
// replaced by "xxxxx" wherever its message quotes it as a credential: as a
// URL's password or token (":SECRET@", "//SECRET@"), after a user name
// ("user:SECRET"), or as the value of a parameter whose name looks secret
// as [Redact] judges names (password=S, "password": "S", token 'S',
// sig=S...). Elsewhere the text is kept, even where it equals secret:
// hiding a password "postgres" in "tenure/postgres" would tell the reader
// the password. errors.Is and errors.As see through the result to err. It
// returns err itself when there was nothing to hide, and nil for nil.
func RedactSecret(err error, secret string) error { return redactSecret(err, secret, false) }

// redactSecret is RedactSecret; anywhere hides secret wherever it stands.
func redactSecret(err error, secret string, anywhere bool) error {
	if err == nil || secret == "" {
		return err
	}
	msg := err.Error()
	changed := false
	for _, f := range escapedForms(secret) {
		var ok bool
		if msg, ok = hideCredential(msg, f, anywhere); ok {
			changed = true
		}
	}
	if !changed {
		return err
	}
	if s, ok := err.(*scrubbedError); ok {
		err = s.err // one layer, whatever the number of secrets
	}
	return &scrubbedError{msg: msg, err: err}
}

// escapedForms returns secret as it was given, unescaped as a query and as
// a path, and each of those query-escaped: the forms a message may quote.
func escapedForms(secret string) []string {
	forms := []string{secret}
	if u, err := url.QueryUnescape(secret); err == nil && u != secret {
		forms = append(forms, u)
	}
	if u, err := url.PathUnescape(secret); err == nil && u != secret {
		forms = append(forms, u)
	}
	for _, f := range forms[:len(forms):len(forms)] {
		if e := url.QueryEscape(f); e != f {
			forms = append(forms, e)
		}
	}
	return forms
}

// hideCredential replaces by the mark each occurrence of secret in msg
// that stands as a credential (see credentialAt), or every occurrence if
// anywhere. It reports whether it replaced any.
func hideCredential(msg, secret string, anywhere bool) (string, bool) {
	if secret == "" {
		return msg, false
	}
	var b strings.Builder
	last, from := 0, 0
	for {
		i := strings.Index(msg[from:], secret)
		if i < 0 {
			break
		}
		i += from
		j := i + len(secret)
		if anywhere || credentialAt(msg, i, j) {
			b.WriteString(msg[last:i])
			b.WriteString(redactMark)
			last, from = j, j
			continue
		}
		from = i + 1
	}
	if last == 0 {
		return msg, false
	}
	b.WriteString(msg[last:])
	return b.String(), true
}

// credentialAt reports whether msg[i:j] stands where a credential is
// written: between ':' or "//" and '@' (a URL's userinfo), as a whole
// value right after "name:" (user:password), or as a whole value after a
// parameter name that looks secret, with '=' or ':' or spaces between and
// the value quoted or not.
func credentialAt(msg string, i, j int) bool {
	if j < len(msg) && msg[j] == '@' && (strings.HasSuffix(msg[:i], ":") || strings.HasSuffix(msg[:i], "//")) {
		return true
	}
	if j < len(msg) && isValueByte(msg[j]) {
		return false // the start of a longer value, which is not the secret
	}
	if i >= 2 && msg[i-1] == ':' && isNameByte(msg[i-2]) {
		return true // user:SECRET, as in digest credentials
	}
	k := skipBack(msg, i, "\"'`")
	k = skipBack(msg, k, " \t")
	if k > 0 && (msg[k-1] == '=' || msg[k-1] == ':') {
		k--
	}
	k = skipBack(msg, k, " \t\"'`")
	if k == i {
		return false // nothing between a name and the value
	}
	n := k
	for n > 0 && isNameByte(msg[n-1]) {
		n--
	}
	return n < k && isSecretName(msg[n:k])
}

// skipBack returns k moved back over the bytes of msg in set, at most two.
func skipBack(msg string, k int, set string) int {
	for range 2 {
		if k > 0 && strings.IndexByte(set, msg[k-1]) >= 0 {
			k--
		}
	}
	return k
}

// isValueByte reports whether c continues a value: a letter, digit or one
// of the characters passwords and tokens are made of besides.
func isValueByte(c byte) bool {
	return isNameByte(c) || strings.IndexByte("+/~!$*%", c) >= 0
}

// isNameByte reports whether c can be part of a parameter name.
func isNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.'
}
