package cache

// Canonical JSON for the values the key keeps as JSON: a tool's parameter
// schema, a structured-output schema, tool-call arguments, a field no
// other format spells. The canonical form is what encoding/json gives for
// json.Marshal of the value json.Unmarshal decodes into an any: every
// object's keys sorted and each given once (the last one wins), strings
// re-escaped the way Marshal escapes them, numbers read as float64 and
// printed shortest, no whitespace. Keys computed before this walker
// existed used that round trip, so it is the definition (FuzzCanonJSON
// holds the two to the same bytes); the walker reads the value once and
// builds no map and no interface value: an agent's request carries its
// tool schemas on every turn, and the round trip through reflection cost
// more than the rest of the key.

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"

	"switchyard/internal/jsonspan"
	"switchyard/wire"
)

// maxCanonDepth is encoding/json's nesting limit: a value nested deeper
// does not decode, so it is not cacheable.
const maxCanonDepth = 10000

// canonJSON returns raw in canonical JSON; nil for null; ErrNotCacheable
// when raw is not JSON encoding/json decodes (invalid, nested past its
// limit, a number past float64's range).
func canonJSON(raw json.RawMessage) (json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	if !jsonspan.Valid(raw) {
		return nil, notCacheable("invalid JSON")
	}
	i := jsonspan.SkipSpace(raw, 0)
	size := len(raw) + 16
	if raw[i] == '{' {
		size += len(raw) // room for the object reordered behind itself
	}
	w := canonWalker{out: make([]byte, 0, size)}
	if _, err := w.value(raw, i); err != nil {
		return nil, notCacheable(err.Error())
	}
	return w.out, nil
}

// canonError is why a valid value has no canonical form.
type canonError string

func (e canonError) Error() string { return string(e) }

// canonWalker writes the canonical form of one valid value in a single
// pass over it. An object's members are written as they come, each value
// once; when their keys were not already in order (and each once), the
// object is assembled again behind them in key order from the spans
// recorded and moved down over them.
type canonWalker struct {
	out   []byte
	ms    []canonMember // the members of the objects open, innermost last
	depth int
}

// canonMember is one member written: its key decoded, the span of its
// value in out, and its place in the object (the last of equal keys wins).
type canonMember struct {
	key        []byte
	start, end int
	pos        int32
	asIs       bool // key is the literal's body, and Marshal writes it unchanged
}

// value writes the value starting at v[i] (no space before it) and
// returns the index after it.
func (w *canonWalker) value(v []byte, i int) (int, error) {
	switch v[i] {
	case '{':
		return w.object(v, i)
	case '[':
		return w.array(v, i)
	case '"':
		return w.str(v, i), nil
	case 't':
		w.out = append(w.out, "true"...)
		return i + 4, nil
	case 'f':
		w.out = append(w.out, "false"...)
		return i + 5, nil
	case 'n':
		w.out = append(w.out, "null"...)
		return i + 4, nil
	}
	return w.number(v, i)
}

func (w *canonWalker) enter() error {
	if w.depth++; w.depth > maxCanonDepth {
		return canonError("exceeded max depth")
	}
	return nil
}

func (w *canonWalker) array(v []byte, i int) (int, error) {
	if err := w.enter(); err != nil {
		return i, err
	}
	w.out = append(w.out, '[')
	i = jsonspan.SkipSpace(v, i+1)
	for n := 0; v[i] != ']'; n++ {
		if n > 0 {
			w.out = append(w.out, ',')
		}
		var err error
		if i, err = w.value(v, i); err != nil {
			return i, err
		}
		if i = jsonspan.SkipSpace(v, i); v[i] == ',' {
			i = jsonspan.SkipSpace(v, i+1)
		}
	}
	w.out = append(w.out, ']')
	w.depth--
	return i + 1, nil
}

func (w *canonWalker) object(v []byte, i int) (int, error) {
	if err := w.enter(); err != nil {
		return i, err
	}
	if w.ms == nil {
		w.ms = make([]canonMember, 0, 16) // made by the first object: an array of strings needs none
	}
	base, m0 := len(w.out), len(w.ms)
	w.out = append(w.out, '{')
	ordered := true // every key after the one before it: written as it stands
	i = jsonspan.SkipSpace(v, i+1)
	for v[i] != '}' {
		ke := jsonspan.SkipString(v, i)
		key, asIs := decodedKey(v[i:ke])
		if n := len(w.ms) - m0; n > 0 {
			w.out = append(w.out, ',')
			ordered = ordered && bytes.Compare(w.ms[len(w.ms)-1].key, key) < 0
		}
		w.out = appendKey(w.out, key, asIs)
		start := len(w.out)
		i = jsonspan.SkipSpace(v, jsonspan.SkipSpace(v, ke)+1) // past the colon
		var err error
		if i, err = w.value(v, i); err != nil {
			return i, err
		}
		w.ms = append(w.ms, canonMember{key: key, start: start, end: len(w.out), pos: int32(len(w.ms) - m0), asIs: asIs})
		if i = jsonspan.SkipSpace(v, i); v[i] == ',' {
			i = jsonspan.SkipSpace(v, i+1)
		}
	}
	if !ordered {
		w.reorder(base, w.ms[m0:])
	} else {
		w.out = append(w.out, '}')
	}
	w.ms = w.ms[:m0]
	w.depth--
	return i + 1, nil
}

// reorder rewrites the object written from base with its members ms in
// key order, each key once (the last of equal keys in the order sent),
// and closes it.
func (w *canonWalker) reorder(base int, ms []canonMember) {
	slices.SortFunc(ms, func(a, b canonMember) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		return int(a.pos - b.pos)
	})
	mid := len(w.out)
	w.out = append(w.out, '{')
	n := 0
	for j := range ms {
		if j+1 < len(ms) && bytes.Equal(ms[j].key, ms[j+1].key) {
			continue
		}
		if n > 0 {
			w.out = append(w.out, ',')
		}
		n++
		w.out = appendKey(w.out, ms[j].key, ms[j].asIs)
		w.out = append(w.out, w.out[ms[j].start:ms[j].end]...)
	}
	w.out = append(w.out, '}')
	w.out = w.out[:base+copy(w.out[base:], w.out[mid:])]
}

// str writes the string literal starting at v[i] as Marshal writes what
// it decodes to: the literal itself when Marshal would write it back
// unchanged (one pass: plain text, the escapes Marshal writes itself,
// valid UTF-8; nearly always), else decoded and encoded again.
func (w *canonWalker) str(v []byte, i int) int {
	if n := wire.MarshalsLiteralAsIs(v[i:]); n > 0 {
		w.out = append(w.out, v[i:i+n]...)
		return i + n
	}
	end := jsonspan.SkipString(v, i)
	w.out = appendCanonString(w.out, v[i:end])
	return end
}

// number writes the number starting at v[i]: as sent when it is an
// integer of at most 15 digits (a float64 prints it the same), else read
// as a float64 and printed as Marshal prints one.
func (w *canonWalker) number(v []byte, i int) (int, error) {
	j, plain := i, true
	if v[j] == '-' {
		j++
	}
	for ; j < len(v); j++ {
		if c := v[j]; c < '0' || c > '9' {
			if c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-' {
				break
			}
			plain = false
		}
	}
	num := v[i:j]
	if plain && j-i <= 15 {
		w.out = append(w.out, num...)
		return j, nil
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil {
		return j, canonError("number " + string(num) + " is out of range")
	}
	w.out = wire.AppendMarshalFloat(w.out, f)
	return j, nil
}

// appendKey writes a member's key and its colon.
func appendKey(dst, key []byte, asIs bool) []byte {
	if asIs {
		dst = append(dst, '"')
		dst = append(dst, key...)
		return append(dst, '"', ':')
	}
	return append(wire.AppendMarshalString(dst, key), ':')
}

// decodedKey is the key the string literal q decodes to: q's own bytes
// when it has no escape and is valid UTF-8 (nearly always), else a copy;
// asIs when Marshal writes those bytes unchanged too.
func decodedKey(q []byte) (key []byte, asIs bool) {
	body := q[1 : len(q)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return body, wire.MarshalsAsIs(body)
	}
	return []byte(wire.DecodeString(q)), false
}

// appendCanonString appends the string literal q as Marshal writes what it
// decodes to, decoded and encoded again: str takes a literal Marshal
// writes back unchanged as it stands before it comes here.
func appendCanonString(dst, q []byte) []byte {
	return wire.AppendMarshalString(dst, []byte(wire.DecodeString(q)))
}
