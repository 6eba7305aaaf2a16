package cache

import (
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
)

func newToolsMemo() *canonMemo[[]Tool] {
	return &canonMemo[[]Tool]{maxBytes: memoMaxBytes, size: toolsSize}
}

// toolsSize is about the memory tools hold.
func toolsSize(ts []Tool) int {
	n := 0
	for _, t := range ts {
		n += 64 + len(t.Name) + len(t.Description) + len(t.Params) + len(t.Raw)
	}
	return n
}

// memoTools reads a tools array raw with read, or takes what an earlier
// request with the same bytes read from m. The tools are shared: callers
// only read them (a slice of capacity len, so an append copies).
func memoTools(m *canonMemo[[]Tool], raw json.RawMessage, read func(json.RawMessage) ([]Tool, error)) ([]Tool, error) {
	if len(raw) < memoMinBytes {
		return read(raw)
	}
	if ts, ok := m.get(raw); ok {
		return ts, nil
	}
	ts, err := read(raw)
	if err == nil {
		ts = slices.Clip(ts)
		m.put(raw, ts)
	}
	return ts, err
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
