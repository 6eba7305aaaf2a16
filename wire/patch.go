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

// TopLevelEdit is one change EditTopLevel makes: Key set to Value (a JSON
// value), or removed when Value is nil.
type TopLevelEdit struct {
	Key   string
	Value []byte
}

// EditTopLevel returns body (a valid JSON object) with the edits applied,
// in one walk and one allocation. Every top-level member whose key names an
// edit's key goes: after its escapes are resolved and in any case, as a
// parser upstream may read it (a body that named "model" twice, or once as
// "mod\u0065l", must not keep a second model beside the one the gateway
// writes). An edit with a value is written once, in place of the first
// such member (its spacing kept, and its spelling when it is the key's
// exactly), or, when there is none, first in the object, in the order of
// edits. Every other byte is kept (a pass-through body stays byte for byte
// the client's but for the edits), but for the space beside a member that
// goes. A body that is not an object is returned as it is.
func EditTopLevel(body []byte, edits ...TopLevelEdit) []byte {
	lbrace := jsonspan.SkipSpace(body, 0)
	if lbrace >= len(body) || body[lbrace] != '{' {
		return body
	}
	type member struct {
		ks, ke, vs, ve int // key start and end, value start and end
		edit           int // the edit it names, -1 none
	}
	var buf [32]member
	members := buf[:0]
	// per edit: whether a member names it, and whether it is written
	var flagBuf [8]struct{ named, written bool }
	flags := flagBuf[:]
	if len(edits) > len(flagBuf) {
		flags = make([]struct{ named, written bool }, len(edits))
	}
	i := lbrace + 1
	for {
		i = jsonspan.SkipSpace(body, i)
		if i < len(body) && body[i] == ',' {
			i = jsonspan.SkipSpace(body, i+1)
		}
		if i >= len(body) || body[i] == '}' {
			break
		}
		ke := jsonspan.SkipString(body, i)
		if ke < 0 {
			return body
		}
		j := jsonspan.SkipSpace(body, ke)
		if j >= len(body) || body[j] != ':' {
			return body
		}
		vs := jsonspan.SkipSpace(body, j+1)
		ve := jsonspan.SkipValue(body, vs)
		if ve < 0 {
			return body
		}
		m := member{ks: i, ke: ke, vs: vs, ve: ve, edit: -1}
		for e := range edits {
			if sameKey(body[i+1:ke-1], []byte(edits[e].Key)) {
				m.edit, flags[e].named = e, true
				break
			}
		}
		members = append(members, m)
		i = ve
	}
	if i >= len(body) {
		return body
	}
	rbrace := i
	size := len(body)
	for _, e := range edits {
		size += len(e.Key) + len(e.Value) + 4
	}
	out := make([]byte, 0, size)
	out = append(out, body[:lbrace+1]...)
	n := 0 // members written
	sep := func() {
		if n > 0 {
			out = append(out, ',')
		}
		n++
	}
	for e, ed := range edits {
		if ed.Value != nil && !flags[e].named {
			sep()
			out = AppendString(out, ed.Key)
			out = append(out, ':')
			out = append(out, ed.Value...)
			flags[e].written = true
		}
	}
	last := -1 // the member last written
	for idx, m := range members {
		replace := m.edit >= 0 && edits[m.edit].Value != nil && !flags[m.edit].written
		if m.edit >= 0 && !replace {
			continue
		}
		// the bytes between it and the member before, when that one was
		// written too (the body's own spacing); else a comma
		switch {
		case idx > 0 && last == idx-1:
			out = append(out, body[members[idx-1].ve:m.ks]...)
		case idx == 0 && n == 0:
			out = append(out, body[lbrace+1:m.ks]...)
		case n > 0:
			out = append(out, ',')
		}
		n++
		last = idx
		if !replace {
			out = append(out, body[m.ks:m.ve]...)
			continue
		}
		ed := edits[m.edit]
		if string(body[m.ks+1:m.ke-1]) == ed.Key {
			out = append(out, body[m.ks:m.vs]...) // its spelling and spacing
		} else {
			out = append(AppendString(out, ed.Key), ':') // "MODEL", "mod\u0065l": the key as upstreams read it
		}
		out = append(out, ed.Value...)
		flags[m.edit].written = true
	}
	if last >= 0 && last == len(members)-1 {
		out = append(out, body[members[last].ve:rbrace]...)
	}
	return append(out, body[rbrace:]...)
}

// SetTopLevel returns body with the top-level key set to raw (a JSON
// value): EditTopLevel with one edit.
func SetTopLevel(body []byte, key string, raw []byte) []byte {
	return EditTopLevel(body, TopLevelEdit{Key: key, Value: raw})
}

// DeleteTopLevel removes a top-level key (every member naming it).
func DeleteTopLevel(body []byte, key string) []byte {
	return EditTopLevel(body, TopLevelEdit{Key: key})
}

// EachMember calls fn with the key (its raw bytes between the quotes,
// escapes kept) and the raw value of each member of the JSON object obj,
// in order, without allocating, until fn returns false. It reports whether
// obj was an object it could walk to its end and fn never said stop.
func EachMember(obj []byte, fn func(key, value []byte) bool) bool {
	return EachMemberMeasured(obj, nil, fn)
}

// EachMemberMeasured is EachMember stepping over the values in measured
// (spans of obj an earlier walk measured) without scanning them
// (jsonspan.EachMemberMeasured).
func EachMemberMeasured(obj []byte, measured [][]byte, fn func(key, value []byte) bool) bool {
	return jsonspan.EachMemberMeasured(obj, measured, func(k, v []byte) error {
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
