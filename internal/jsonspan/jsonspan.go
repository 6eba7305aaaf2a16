// Package jsonspan walks JSON that encoding/json has already validated,
// without allocating: it finds the byte span of a value, of each element
// of an array and of each member of an object. wire decodes bounded
// request shapes with it; catalog sizes a decoded key list with it.
package jsonspan

import (
	"bytes"
	"errors"
)

// ErrNotArray is returned by EachElement for a value that is not an array
// (and by EachMember for one that is not an object).
var ErrNotArray = errors.New("not an array")

// EachElement calls fn with the span of every element of the JSON array b
// (already valid JSON), stopping at fn's first error.
func EachElement(b []byte, fn func(i int, elem []byte) error) error {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return ErrNotArray
	}
	i++
	for n := 0; ; n++ {
		i = SkipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = SkipSpace(b, i+1)
		}
		if i >= len(b) || b[i] == ']' {
			return nil
		}
		end := SkipValue(b, i)
		if end < 0 {
			return ErrNotArray
		}
		if err := fn(n, b[i:end]); err != nil {
			return err
		}
		i = end
	}
}

// EachMember calls fn with the raw key (without quotes, escapes as sent)
// and the value span of every member of the JSON object b (already valid
// JSON); ErrNotArray when b is not an object. A key given twice is reported
// twice: the last one wins for the caller, as in encoding/json.
func EachMember(b []byte, fn func(key, val []byte) error) error {
	return EachMemberMeasured(b, nil, fn)
}

// EachMemberMeasured is EachMember stepping over the values in measured
// without scanning them: each is a value of b already measured (a span of
// b's own bytes, as an earlier walk of b gave it), and a member whose value
// starts where one of them does ends where it ends. A span that is not of
// b's bytes is never used, so a copy costs only the scan it does not save.
func EachMemberMeasured(b []byte, measured [][]byte, fn func(key, val []byte) error) error {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return ErrNotArray
	}
	i++
	for {
		i = SkipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = SkipSpace(b, i+1)
		}
		if i >= len(b) || b[i] == '}' {
			return nil
		}
		ke := SkipString(b, i)
		if ke < 0 {
			return ErrNotArray
		}
		key := b[i+1 : ke-1]
		i = SkipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return ErrNotArray
		}
		i = SkipSpace(b, i+1)
		ve := measuredEnd(b, i, measured)
		if ve < 0 {
			ve = SkipValue(b, i)
		}
		if ve < 0 || ve == i {
			return ErrNotArray
		}
		if err := fn(key, b[i:ve]); err != nil {
			return err
		}
		i = ve
	}
}

// measuredEnd is the end of the value at b[i] when one of measured is
// that value (a non-empty span of b's array starting at b[i], not past
// b's end), or -1.
func measuredEnd(b []byte, i int, measured [][]byte) int {
	if i >= len(b) {
		return -1
	}
	for _, m := range measured {
		if len(m) > 0 && &m[0] == &b[i] && len(m) <= len(b)-i {
			return i + len(m)
		}
	}
	return -1
}

// IsSpace reports whether c is JSON whitespace.
func IsSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}

// SkipString returns the index after the string starting at b[i] == '"'.
// A backslash escapes the byte after it, so the string ends at the first
// quote after an even run of backslashes; the quotes are found with
// bytes.IndexByte, which a long content string crosses many bytes at a time.
func SkipString(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for i++; ; {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1
		}
		j += i
		k := j // the run of backslashes before the quote (never past i: b[i-1] is a quote)
		for k > i && b[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j + 1
		}
		i = j + 1
	}
}

// SkipValue returns the index after the JSON value starting at b[i].
func SkipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = SkipString(b, i)
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
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && !IsSpace(b[i]) {
			i++
		}
		return i
	}
}
