package wire

import (
	"errors"

	"switchyard/internal/jsonspan"
)

// FindTopLevel returns the byte span [start, end) of the value of a
// top-level key in a JSON object, scanning without allocating. The body must
// already be valid JSON (Parse guarantees it).
func FindTopLevel(body []byte, key string) (start, end int, ok bool) {
	i := jsonspan.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return 0, 0, false
	}
	i++
	for {
		i = jsonspan.SkipSpace(body, i)
		if i >= len(body) || body[i] == '}' {
			return 0, 0, false
		}
		if body[i] == ',' {
			i++
			continue
		}
		ks := i
		ke := jsonspan.SkipString(body, i)
		if ke < 0 {
			return 0, 0, false
		}
		match := ke-ks-2 == len(key) && string(body[ks+1:ke-1]) == key
		i = jsonspan.SkipSpace(body, ke)
		if i >= len(body) || body[i] != ':' {
			return 0, 0, false
		}
		i = jsonspan.SkipSpace(body, i+1)
		vs := i
		ve := jsonspan.SkipValue(body, i)
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
	i := jsonspan.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return body
	}
	out := make([]byte, 0, len(body)+len(key)+len(raw)+4)
	out = append(out, body[:i+1]...)
	out = AppendString(out, key)
	out = append(out, ':')
	out = append(out, raw...)
	rest := body[i+1:]
	if j := jsonspan.SkipSpace(rest, 0); j < len(rest) && rest[j] != '}' {
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
	j := jsonspan.SkipSpace(body, e)
	if j < len(body) && body[j] == ',' {
		e = j + 1
	} else {
		p := ks - 1
		for p >= 0 && jsonspan.IsSpace(body[p]) {
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

// EachMember calls fn with the key (its raw bytes between the quotes,
// escapes kept) and the raw value of each member of the JSON object obj,
// in order, without allocating, until fn returns false. It reports whether
// obj was an object it could walk to its end and fn never said stop.
func EachMember(obj []byte, fn func(key, value []byte) bool) bool {
	return jsonspan.EachMember(obj, func(k, v []byte) error {
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
	return jsonspan.EachElement(arr, func(_ int, e []byte) error {
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
