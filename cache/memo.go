package cache

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"sync"
)

// memoMinBytes is the least size of a value worth a memo entry: a smaller
// one is read about as fast as it is looked up.
const memoMinBytes = 256

// memoMaxBytes bounds each memo: its two generations hold at most this
// many bytes of values and what they read as, together.
const memoMaxBytes = 2 << 20

// The node's memos of what an agent sends unchanged on every turn: each
// tool schema's canonical JSON, and each format's whole tools array read
// into canonical tools.
var (
	schemas   = &canonMemo[json.RawMessage]{maxBytes: memoMaxBytes, size: func(c json.RawMessage) int { return len(c) }}
	oaToolset = newToolsMemo()
	anToolset = newToolsMemo()
	rsToolset = newToolsMemo()
	// argsMemo maps a team and a tool call's arguments literal to the
	// arguments in canonical JSON (fieldSet.args)
	argsMemo = &canonMemo[string]{maxBytes: memoMaxBytes, size: func(c string) int { return len(c) + 64 }}
)

func newToolsMemo() *canonMemo[*toolSet] {
	return &canonMemo[*toolSet]{maxBytes: memoMaxBytes, size: toolsSize}
}

// toolSet is a tools array read into canonical tools, with the digest the
// key hashes for them (toolsDigest): an agent's tools are the larger part
// of its turn's bytes (20 tools with their schemas: 26 of 36 KB), the
// same on every turn, so a memo hit saves hashing them as well.
type toolSet struct {
	list []Tool
	sum  [sha256.Size]byte
}

// toolsSize is about the memory a tool set holds.
func toolsSize(ts *toolSet) int {
	n := 32 + sha256.Size
	for _, t := range ts.list {
		n += 64 + len(t.Name) + len(t.Description) + len(t.Params) + len(t.Raw)
	}
	return n
}

// memoTools reads a tools array raw with read into c.Tools, or takes what
// an earlier request with the same bytes read from m, with their digest
// (c.toolsSum; nil for an array too short for the memo). The tools are
// shared: callers only read them (a slice of capacity len, so an append
// copies).
func memoTools(c *Canon, m *canonMemo[*toolSet], raw json.RawMessage, read func(json.RawMessage) ([]Tool, error)) error {
	if len(raw) < memoMinBytes {
		var err error
		c.Tools, err = read(raw)
		return err
	}
	if ts, ok := m.get(raw); ok {
		c.Tools, c.toolsSum = ts.list, &ts.sum
		return nil
	}
	ts, err := read(raw)
	if err != nil {
		return err // the request is not cacheable: c is dropped
	}
	set := &toolSet{list: slices.Clip(ts), sum: toolsDigest(ts)}
	m.put(raw, set)
	c.Tools, c.toolsSum = set.list, &set.sum
	return nil
}

// canonMemo maps a value's exact bytes to what it reads as, bounded in
// bytes (the value's and size's count): entries go into the current
// generation, and when it passes half the bound the previous generation
// is dropped and the current one takes its place; a hit in the previous
// generation moves to the current one. A value is found only under its
// exact bytes (the map compares them whole), so a hit is what reading it
// again would give. What it holds is shared: callers only read it.
type canonMemo[V any] struct {
	maxBytes int
	size     func(V) int

	mu        sync.Mutex
	cur, prev map[string]V // guarded by mu
	curBytes  int          // guarded by mu
}

func (m *canonMemo[V]) get(raw []byte) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.cur[string(raw)]; ok {
		return v, true
	}
	v, ok := m.prev[string(raw)]
	if ok {
		m.putLocked(string(raw), v)
	}
	return v, ok
}

func (m *canonMemo[V]) put(raw []byte, v V) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.putLocked(string(raw), v)
}

func (m *canonMemo[V]) putLocked(raw string, v V) {
	size := len(raw) + m.size(v)
	if size > m.maxBytes/2 {
		return
	}
	if m.curBytes+size > m.maxBytes/2 {
		m.prev, m.cur, m.curBytes = m.cur, nil, 0
	}
	if m.cur == nil {
		m.cur = make(map[string]V)
	}
	if _, ok := m.cur[raw]; !ok {
		m.cur[raw] = v
		m.curBytes += size
	}
}
