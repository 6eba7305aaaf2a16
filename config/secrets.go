package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
)

// KeyDigestPrefix marks a key given as its SHA-256 digest instead of in clear.
const KeyDigestPrefix = "sha256:"

// errKeyDigest is a "sha256:" key whose digest is not 64 hex digits.
var errKeyDigest = errors.New("sha256: needs 64 hex digits")

// KeyDigest is a key's identity (SPEC 3, 15): the SHA-256 digest of a clear
// key, or the digest a "sha256:<hex>" key names (hex in any case). A clear
// key and its digest form are the same key. An empty key has no digest.
func KeyDigest(key string) ([32]byte, error) {
	var d [32]byte
	if hexed, ok := strings.CutPrefix(key, KeyDigestPrefix); ok {
		if len(hexed) != 2*len(d) {
			return d, errKeyDigest
		}
		if _, err := hex.Decode(d[:], []byte(hexed)); err != nil {
			return d, errKeyDigest
		}
		return d, nil
	}
	if key == "" {
		return d, errors.New("empty key")
	}
	return sha256.Sum256([]byte(key)), nil
}

// redacted replaces a secret in a message.
const redacted = "xxxxx"

// RedactURL returns raw with its password and query values replaced by
// "xxxxx", for messages and logs (SPEC 15). It also works on a URL that does
// not parse: everything before the last "@" (after the scheme) is then
// replaced, and the query dropped.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return redactUnparsed(raw)
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), redacted)
		} else {
			u.User = url.User(redacted) // redis://secret@host: a lone userinfo is the password
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{redacted}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

func redactUnparsed(raw string) string {
	out := raw
	if i := strings.IndexAny(out, "?#"); i >= 0 {
		out = out[:i]
	}
	at := strings.LastIndexByte(out, '@')
	if at < 0 {
		return out
	}
	if i := strings.Index(out, "://"); i >= 0 && i < at {
		return out[:i+3] + redacted + out[at:]
	}
	return redacted + out[at:]
}

// URLSecrets returns the secrets a URL carries (its userinfo password, its
// query values), found even when the URL does not parse, so that a message
// quoting the URL in any form can be scrubbed of them.
func URLSecrets(raw string) []string {
	var out []string
	add := func(s string) {
		if s != "" && s != redacted {
			out = append(out, s)
			if un, err := url.PathUnescape(s); err == nil && un != s {
				out = append(out, un)
			}
		}
	}
	rest := raw
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		q := rest[i+1:]
		rest = rest[:i]
		if j := strings.IndexByte(q, '#'); j >= 0 {
			q = q[:j]
		}
		for _, kv := range strings.Split(q, "&") {
			if _, v, ok := strings.Cut(kv, "="); ok {
				add(v)
			}
		}
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return out
	}
	user := rest[:at]
	if i := strings.Index(user, "://"); i >= 0 {
		user = user[i+3:]
	} else if i := strings.LastIndexByte(user, '/'); i >= 0 {
		user = user[i+1:]
	}
	if _, pass, ok := strings.Cut(user, ":"); ok {
		add(pass)
	} else {
		add(user)
	}
	return out
}

// RedactIn replaces every secret of rawURL (see URLSecrets) in msg, for an
// error from a library that quotes the URL it was given.
func RedactIn(msg, rawURL string) string {
	for _, s := range URLSecrets(rawURL) {
		msg = strings.ReplaceAll(msg, s, redacted)
	}
	return msg
}
