package cache

import (
	"encoding/binary"
	"errors"
	"math"
	"time"
)

// Entry is a stored answer in canonical form (SPEC 18): what any client
// format and mode is rendered from. A chat entry holds text and tool calls;
// an embeddings entry holds vectors.
type Entry struct {
	Embeddings bool // an embeddings answer (Vectors), else chat

	Text      string
	ToolCalls []ToolCall
	Finish    string // stop | length | tool_calls
	Usage     Usage
	Vectors   [][]float64

	Tier       string // "easy" | "hard" for a tier alias, else ""
	Model      string // the public model that served it
	Deployment string // the deployment id that served it
	StoredAt   time.Time
}

// ToolCall is one tool call of a chat answer; Arguments is JSON text.
type ToolCall struct {
	ID, Name, Arguments string
}

// Usage is the answer's token usage when it was computed: what a hit saves.
type Usage struct {
	PromptTokens, CompletionTokens, CachedTokens int
}

// Age is the whole seconds since the entry was stored, for the Age header.
func (e *Entry) Age(now time.Time) int64 {
	s := int64(now.Sub(e.StoredAt) / time.Second)
	return max(s, 0)
}

// Finish reasons an entry may hold: only complete answers are stored.
func storableFinish(f string) bool { return f == "stop" || f == "length" || f == "tool_calls" }

// The encoding: a magic byte and a version, then the fields in order, each
// string and list length-prefixed (uvarint), integers as uvarints, vectors
// as float64 bits. It is compact, needs no schema and decodes without
// reflection; Decode bounds every length by the bytes left, so a hostile or
// truncated value costs at most its own size.
const (
	encMagic   = 0xC5
	encVersion = 1
	flagEmbed  = 1
)

// ErrCorrupt is returned by Decode for bytes that are not an entry.
var ErrCorrupt = errors.New("cache: corrupt entry")

// Encode appends the entry's encoding to dst.
func (e *Entry) Encode(dst []byte) []byte {
	var flags uint64
	if e.Embeddings {
		flags |= flagEmbed
	}
	dst = append(dst, encMagic, encVersion)
	dst = binary.AppendUvarint(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(max(e.StoredAt.UnixMilli(), 0)))
	for _, s := range [...]string{e.Tier, e.Model, e.Deployment, e.Finish, e.Text} {
		dst = appendStr(dst, s)
	}
	for _, n := range [...]int{e.Usage.PromptTokens, e.Usage.CompletionTokens, e.Usage.CachedTokens} {
		dst = binary.AppendUvarint(dst, uint64(max(n, 0)))
	}
	dst = binary.AppendUvarint(dst, uint64(len(e.ToolCalls)))
	for _, tc := range e.ToolCalls {
		dst = appendStr(dst, tc.ID)
		dst = appendStr(dst, tc.Name)
		dst = appendStr(dst, tc.Arguments)
	}
	dst = binary.AppendUvarint(dst, uint64(len(e.Vectors)))
	for _, v := range e.Vectors {
		dst = binary.AppendUvarint(dst, uint64(len(v)))
		for _, x := range v {
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(x))
		}
	}
	return dst
}

// EncodedSize is the length Encode would produce, to check max_entry_bytes
// before encoding a large answer.
func (e *Entry) EncodedSize() int {
	n := 2 + 2*binary.MaxVarintLen64
	for _, s := range [...]string{e.Tier, e.Model, e.Deployment, e.Finish, e.Text} {
		n += binary.MaxVarintLen64 + len(s)
	}
	n += 4 * binary.MaxVarintLen64
	for _, tc := range e.ToolCalls {
		n += 3*binary.MaxVarintLen64 + len(tc.ID) + len(tc.Name) + len(tc.Arguments)
	}
	n += binary.MaxVarintLen64
	for _, v := range e.Vectors {
		n += binary.MaxVarintLen64 + 8*len(v)
	}
	return n
}

// EncodeLimited encodes the entry when it fits in maxBytes (SPEC 18:
// larger answers are not stored); ok is false otherwise.
func (e *Entry) EncodeLimited(maxBytes int64) (b []byte, ok bool) {
	if int64(e.EncodedSize()) > maxBytes {
		b = e.Encode(nil) // the estimate is an upper bound: measure exactly
		return b, int64(len(b)) <= maxBytes
	}
	return e.Encode(make([]byte, 0, e.EncodedSize())), true
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// decoder reads the encoding; the first problem sticks.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 {
	if d.bad {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length that needs at least unit bytes per element.
func (d *decoder) count(unit int) int {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)/unit) {
		d.bad = true
		return 0
	}
	return int(n)
}

func (d *decoder) str() string {
	n := d.count(1)
	if d.bad {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) int() int {
	v := d.uvarint()
	if v > math.MaxInt32 {
		d.bad = true
	}
	return int(v)
}

// Decode reads an entry that Encode wrote. It never panics and allocates at
// most a small multiple of len(b).
func Decode(b []byte) (*Entry, error) {
	if len(b) < 2 || b[0] != encMagic || b[1] != encVersion {
		return nil, ErrCorrupt
	}
	d := &decoder{b: b[2:]}
	e := &Entry{}
	flags := d.uvarint()
	e.Embeddings = flags&flagEmbed != 0
	ms := d.uvarint()
	if ms > math.MaxInt64 {
		d.bad = true
	}
	e.StoredAt = time.UnixMilli(int64(ms)).UTC()
	e.Tier, e.Model, e.Deployment, e.Finish, e.Text = d.str(), d.str(), d.str(), d.str(), d.str()
	e.Usage = Usage{d.int(), d.int(), d.int()}
	if n := d.count(3); n > 0 {
		e.ToolCalls = make([]ToolCall, n)
		for i := range e.ToolCalls {
			e.ToolCalls[i] = ToolCall{ID: d.str(), Name: d.str(), Arguments: d.str()}
		}
	}
	if n := d.count(1); n > 0 {
		e.Vectors = make([][]float64, n)
		for i := range e.Vectors {
			m := d.count(8)
			if d.bad {
				break
			}
			v := make([]float64, m)
			for j := range v {
				v[j] = math.Float64frombits(binary.LittleEndian.Uint64(d.b))
				d.b = d.b[8:]
			}
			e.Vectors[i] = v
		}
	}
	if d.bad || len(d.b) != 0 || flags&^flagEmbed != 0 {
		return nil, ErrCorrupt
	}
	if !e.Embeddings && !storableFinish(e.Finish) {
		return nil, ErrCorrupt
	}
	return e, nil
}
