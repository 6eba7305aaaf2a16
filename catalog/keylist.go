package catalog

import (
	"encoding/json"
	"errors"
)

// KeyList is a team's keys. It decodes into a list of exactly its length:
// encoding/json grows a slice by doubling, which for 100,000 keys held
// about 45 MB at once while a node restarting loaded the stored catalog,
// and kept 30% of it as slack for good.
type KeyList []Key

// UnmarshalJSON decodes a JSON array of keys (or null) from b, the array's
// own bytes in the document (encoding/json passes them without a copy):
// its elements are counted first, then decoded one at a time into a list
// of that length.
func (l *KeyList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*l = nil
		return nil
	}
	n, ok := eachElement(b, nil)
	if !ok {
		return errors.New("catalog: keys is not a JSON array")
	}
	keys := make(KeyList, n)
	i := 0
	var err error
	eachElement(b, func(elem []byte) bool {
		err = json.Unmarshal(elem, &keys[i])
		i++
		return err == nil
	})
	if err != nil {
		return err
	}
	*l = keys
	return nil
}

// eachElement calls fn (when not nil) with each element of the JSON array
// b, which encoding/json has already checked, and returns how many there
// are; ok is false when b is not an array or fn stopped the walk.
func eachElement(b []byte, fn func([]byte) bool) (n int, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return 0, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return 0, true
	}
	for i < len(b) {
		end := valueEnd(b, i)
		if end < 0 {
			return n, false
		}
		if fn != nil && !fn(b[i:end]) {
			return n, false
		}
		n++
		i = skipSpace(b, end)
		if i >= len(b) {
			return n, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return n, true
		default:
			return n, false
		}
	}
	return n, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd is the index just past the JSON value starting at b[i] (valid
// JSON), or -1: strings are skipped with their escapes, objects and arrays
// by depth, scalars to the next delimiter.
func valueEnd(b []byte, i int) int {
	depth := 0
	for j := i; j < len(b); j++ {
		switch c := b[j]; c {
		case '"':
			for j++; j < len(b) && b[j] != '"'; j++ {
				if b[j] == '\\' {
					j++
				}
			}
			if j >= len(b) {
				return -1
			}
			if depth == 0 {
				return j + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 { // the end of the enclosing array: a scalar ended
				return j
			}
			if depth--; depth == 0 {
				return j + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return j
			}
		}
	}
	if depth == 0 {
		return len(b)
	}
	return -1
}
