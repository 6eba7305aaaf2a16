package wire

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"

	"switchyard/internal/jsonspan"
)

// repeatedKey returns a top-level key of body (a JSON object) that another
// member names again: the same name once escapes are resolved, in any
// case. encoding/json decodes such a body with the last of them, and a
// parser upstream may read the first or refuse the body, so the gateway
// would route, estimate, cap and cache what the upstream does not answer:
// ParseLimited refuses it (400 duplicate_field). "" when every key is
// named once (or body is not an object: the decoder words that).
func repeatedKey(body []byte) string {
	var keys keyList
	dup := ""
	_ = jsonspan.EachMember(body, func(k, _ []byte) error {
		if keys.repeats(k) {
			dup = string(k)
			return errStopped
		}
		return nil
	})
	return dup
}

// keyList is the keys of one JSON object so far, raw, and tells a key that
// names one of them again (sameKey): compared in place, without
// allocating, up to 16, then by their folded names in a map. repeatedKey
// and the fast readers' walk (EachField) share it.
type keyList struct {
	small [16][]byte
	n     int
	more  map[string]struct{} // folded names, once past 16 keys
}

// repeats adds the raw key k and reports whether an earlier key reads as
// the same name.
func (l *keyList) repeats(k []byte) bool {
	if l.more == nil {
		for _, o := range l.small[:l.n] {
			if sameKey(o, k) {
				return true
			}
		}
		if l.n < len(l.small) {
			l.small[l.n] = k
			l.n++
			return false
		}
		l.more = make(map[string]struct{}, 4*l.n)
		for _, o := range l.small[:l.n] {
			l.more[foldedKey(o)] = struct{}{}
		}
	}
	name := foldedKey(k)
	if _, ok := l.more[name]; ok {
		return true
	}
	l.more[name] = struct{}{}
	return false
}

// sameKey reports whether the raw keys a and b read as one name (escapes
// resolved, in any case).
func sameKey(a, b []byte) bool {
	if bytes.IndexByte(a, '\\') < 0 && bytes.IndexByte(b, '\\') < 0 {
		return strings.EqualFold(string(a), string(b))
	}
	return foldedKey(a) == foldedKey(b)
}

// foldedKey is the raw key k (escapes as sent) as a parser reads it,
// folded as encoding/json folds a key to match it to a field (its
// foldName: an ASCII letter in upper case, any other rune the smallest of
// its Unicode fold orbit), so two keys get one folded name exactly when
// strings.EqualFold holds between their decoded names: what keyList
// compares past its first keys. strings.ToLower is not that fold: it
// leaves a long s (U+017F) a long s, which encoding/json reads as s, so
// "max_tokenſ" past the sixteenth key passed for a new name.
func foldedKey(k []byte) string {
	if bytes.IndexByte(k, '\\') >= 0 {
		q := make([]byte, 0, len(k)+2)
		k = []byte(decodeString(append(append(append(q, '"'), k...), '"')))
	}
	var buf [64]byte
	out := buf[:0]
	for i := 0; i < len(k); {
		if c := k[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(k[i:])
		out = utf8.AppendRune(out, foldRune(r))
		i += n
	}
	return string(out)
}

// foldRune is the smallest rune of r's Unicode fold orbit (encoding/json's
// foldRune).
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// errDuplicate is ParseLimited's answer to a body repeatedKey refuses.
func errDuplicate(key string) *Error {
	if len(key) > 64 { // the client's own bytes, but bounded
		key = strings.ToValidUTF8(key[:64], "") + "..."
	}
	return &Error{Param: key, Code: "duplicate_field",
		Message: "the body names a field a second time as \"" + key + "\" (the same key, escaped or in another case): send each field once"}
}
