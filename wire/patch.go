package wire

import "errors"

// FindTopLevel returns the byte span [start, end) of the value of a
// top-level key in a JSON object, scanning without allocating. The body must
// already be valid JSON (Parse guarantees it).
func FindTopLevel(body []byte, key string) (start, end int, ok bool) {
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' {
		return 0, 0, false
	}
	i++
	for {
		i = skipWS(body, i)
		if i >= len(body) || body[i] == '}' {
			return 0, 0, false
		}
		if body[i] == ',' {
			i++
			continue
		}
		ks := i
		ke := skipString(body, i)
		if ke < 0 {
			return 0, 0, false
		}
		match := ke-ks-2 == len(key) && string(body[ks+1:ke-1]) == key
		i = skipWS(body, ke)
		if i >= len(body) || body[i] != ':' {
			return 0, 0, false
		}
		i = skipWS(body, i+1)
		vs := i
		ve := skipValue(body, i)
		if ve < 0 {
			return 0, 0, false
		}
		if match {
			return vs, ve, true
		}
		i = ve
	}
}

// SetTopLevel returns body with the top-level key set to raw (a JSON
// value), replacing it in place or inserting it first. One allocation.
func SetTopLevel(body []byte, key string, raw []byte) []byte {
	if s, e, ok := FindTopLevel(body, key); ok {
		out := make([]byte, 0, len(body)-(e-s)+len(raw))
		out = append(out, body[:s]...)
		out = append(out, raw...)
		return append(out, body[e:]...)
	}
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' {
		return body
	}
	out := make([]byte, 0, len(body)+len(key)+len(raw)+4)
	out = append(out, body[:i+1]...)
	out = AppendString(out, key)
	out = append(out, ':')
	out = append(out, raw...)
	rest := body[i+1:]
	if j := skipWS(rest, 0); j < len(rest) && rest[j] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// DeleteTopLevel removes a top-level key (and its comma) if present.
func DeleteTopLevel(body []byte, key string) []byte {
	s, e, ok := FindTopLevel(body, key)
	if !ok {
		return body
	}
	// walk back over `"key"\s*:\s*` to the key's opening quote
	ks := s - 1
	for ks >= 0 && body[ks] != ':' {
		ks--
	}
	ks--
	for ks >= 0 && body[ks] != '"' {
		ks--
	}
	ks--
	for ks >= 0 && body[ks] != '"' {
		ks--
	}
	// consume a following comma, or else a preceding one
	j := skipWS(body, e)
	if j < len(body) && body[j] == ',' {
		e = j + 1
	} else {
		p := ks - 1
		for p >= 0 && isWS(body[p]) {
			p--
		}
		if p >= 0 && body[p] == ',' {
			ks = p
		}
	}
	out := make([]byte, 0, len(body)-(e-ks))
	out = append(out, body[:ks]...)
	return append(out, body[e:]...)
}

func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index after the JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				if i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default:
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && !isWS(b[i]) {
			i++
		}
		return i
	}
}

// EachMember calls fn with the key (its raw bytes between the quotes,
// escapes kept) and the raw value of each member of the JSON object obj,
// in order, without allocating, until fn returns false. It reports whether
// obj was an object it could walk to its end and fn never said stop.
func EachMember(obj []byte, fn func(key, value []byte) bool) bool {
	return eachMember(obj, func(k, v []byte) error {
		if !fn(k, v) {
			return errStopped
		}
		return nil
	}) == nil
}

// errStopped ends an EachMember walk whose callback said stop.
var errStopped = errors.New("wire: walk stopped")

// EachElement calls fn with the raw span of each element of the JSON array
// arr (already valid JSON: a body wire.Parse accepted, or a span of one),
// in order, without allocating, until fn returns false. It reports whether
// arr was an array it could walk to its end and fn never said stop.
func EachElement(arr []byte, fn func(elem []byte) bool) bool {
	return eachElement(arr, func(_ int, e []byte) error {
		if !fn(e) {
			return errStopped
		}
		return nil
	}) == nil
}

// DecodeString decodes the JSON string literal q (valid JSON) with
// encoding/json's semantics: escapes resolved, an invalid byte or a lone
// surrogate becomes U+FFFD. It allocates the result only.
func DecodeString(q []byte) string { return decodeString(q) }
