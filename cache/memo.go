package cache

import "sync"

// memoMinBytes is the least size of a schema worth a memo entry: a smaller
// one is canonicalized about as fast as it is looked up.
const memoMinBytes = 256

// memoMaxBytes bounds a canonMemo: its two generations hold at most this
// many bytes of schemas and their canonical forms together.
const memoMaxBytes = 2 << 20

// schemas is the node's memo of canonical tool and output schemas.
var schemas = &canonMemo{maxBytes: memoMaxBytes}

// canonMemo maps a value's exact bytes to its canonical JSON, bounded in
// bytes: entries go into the current generation, and when it passes half
// the bound the previous generation is dropped and the current one takes
// its place; a hit in the previous generation moves to the current one. A
// value is found only under its exact bytes (the map compares them whole),
// so a memo hit is what canonJSON would return. The canonical bytes are
// shared: callers only read them (they are hashed into keys).
type canonMemo struct {
	maxBytes int

	mu        sync.Mutex
	cur, prev map[string][]byte // guarded by mu
	curBytes  int               // guarded by mu
}

func (m *canonMemo) get(raw []byte) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.cur[string(raw)]; ok {
		return c, true
	}
	c, ok := m.prev[string(raw)]
	if ok {
		m.putLocked(string(raw), c)
	}
	return c, ok
}

func (m *canonMemo) put(raw, canon []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.putLocked(string(raw), canon)
}

func (m *canonMemo) putLocked(raw string, canon []byte) {
	size := len(raw) + len(canon)
	if size > m.maxBytes/2 {
		return
	}
	if m.curBytes+size > m.maxBytes/2 {
		m.prev, m.cur, m.curBytes = m.cur, nil, 0
	}
	if m.cur == nil {
		m.cur = make(map[string][]byte)
	}
	if _, ok := m.cur[raw]; !ok {
		m.cur[raw] = canon
		m.curBytes += size
	}
}
