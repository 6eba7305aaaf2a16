package telemetry

import (
	"context"
	"encoding/json"
	"hash/maphash"
	"sync"
)

// Ring is the bounded in-memory audit log used without Redis (and as this
// node's copy with it). The oldest entry is evicted when it is full; no
// entry replaces another.
//
// It keeps each entry encoded (Entry.AppendJSON) in chunks of bytes the
// collector does not scan, with a record of plain numbers for the
// filters, and decodes what a read returns. Held decoded, 10,000 entries
// were about five objects each, most of what a one-team node's collector
// marked (a forced collection of a warm node: 6.6 ms of CPU, 1.9 with a
// ring of 10).
type Ring struct {
	seed maphash.Seed // immutable

	mu   sync.Mutex
	recs []ringRecord // guarded by mu
	next int          // guarded by mu: the record written next (the oldest once full)
	// chunks hold the entries' bytes, chunk number base+i at i. A chunk is
	// only appended to, never written over, so a record's bytes can be
	// read without the lock; chunks older than the oldest record's are
	// dropped (the writer may still hold a slice of one: Entry.raw).
	chunks [][]byte // guarded by mu
	base   uint32   // guarded by mu
}

// ringRecord is one entry of a Ring: the hashes of the fields a Filter
// reads, and where its bytes are.
type ringRecord struct {
	id, team, model, routed uint64 // maphash of RequestID, Team, RequestedModel, RoutedModel
	status                  int32
	chunk                   uint32 // the number of the chunk holding its bytes
	off, n                  int32  // its bytes in the chunk
	used                    bool
}

// ringChunk is the size of a ring's chunk (an entry larger than it gets a
// chunk of its own).
const ringChunk = 64 << 10

// NewRing returns a ring holding at most size entries.
func NewRing(size int) *Ring {
	if size < 1 {
		size = 1
	}
	return &Ring{seed: maphash.MakeSeed(), recs: make([]ringRecord, size)}
}

// scratch is the buffer an entry is encoded into before the ring's lock
// is taken.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Record stores e, evicting the oldest entry when full. e keeps its
// bytes (raw), which the stream's writer sends: e must not change after.
func (r *Ring) Record(e *Entry) {
	bp := scratch.Get().(*[]byte)
	b := e.AppendJSON((*bp)[:0])
	rec := ringRecord{
		id: r.hash(e.RequestID), team: r.hash(e.Team), model: r.hash(e.RequestedModel), routed: r.hash(e.RoutedModel),
		status: int32(e.Status), used: true,
	}
	r.mu.Lock()
	e.raw = r.appendLocked(&rec, b)
	r.recs[r.next] = rec
	r.next = (r.next + 1) % len(r.recs)
	r.dropLocked()
	r.mu.Unlock()
	if cap(b) <= 64<<10 { // an entry that grew the buffer past that is not kept for the next
		*bp = b
		scratch.Put(bp)
	}
}

func (r *Ring) hash(s string) uint64 { return maphash.String(r.seed, s) }

// appendLocked copies b into the newest chunk (a new one when it has no
// room), sets where rec's bytes are, and returns them.
func (r *Ring) appendLocked(rec *ringRecord, b []byte) []byte {
	last := len(r.chunks) - 1
	if last < 0 || cap(r.chunks[last])-len(r.chunks[last]) < len(b) {
		r.chunks = append(r.chunks, make([]byte, 0, max(ringChunk, len(b))))
		last++
	}
	c := r.chunks[last]
	rec.chunk, rec.off, rec.n = r.base+uint32(last), int32(len(c)), int32(len(b))
	c = append(c, b...)
	r.chunks[last] = c
	return c[rec.off:len(c):len(c)]
}

// dropLocked lets go of the chunks before the oldest record's.
func (r *Ring) dropLocked() {
	oldest := &r.recs[r.next]
	if !oldest.used {
		oldest = &r.recs[0]
	}
	k := int(oldest.chunk - r.base)
	if k <= 0 {
		return
	}
	clear(r.chunks[:k])
	r.chunks = r.chunks[k:]
	r.base = oldest.chunk
}

// bytesLocked are rec's bytes.
func (r *Ring) bytesLocked(rec *ringRecord) []byte {
	c := r.chunks[rec.chunk-r.base]
	return c[rec.off : rec.off+rec.n]
}

// Lookup implements AuditLog.
func (r *Ring) Lookup(ctx context.Context, requestID string) ([]*Entry, error) {
	return r.Recent(ctx, Filter{RequestID: requestID, Limit: maxLimit})
}

// Recent implements AuditLog: a walk from the newest entry, bounded by the
// ring's size. The records whose hashes pass f are found under the lock
// and decoded after it (a chunk is never written over), then checked
// against f itself; two different values of one 64-bit hash are not
// expected, and would make an answer short, never wrong.
func (r *Ring) Recent(_ context.Context, f Filter) ([]*Entry, error) {
	lim := f.limit()
	id, team, model := r.hash(f.RequestID), r.hash(f.Team), r.hash(f.Model)
	var found [][]byte
	r.mu.Lock()
	n := len(r.recs)
	for i := 1; i <= n && len(found) < lim; i++ {
		rec := &r.recs[(r.next-i+n)%n]
		if !rec.used {
			break
		}
		if (f.RequestID != "" && rec.id != id) || (f.Team != "" && rec.team != team) ||
			(f.Model != "" && rec.model != model && rec.routed != model) || (f.Status != 0 && rec.status != int32(f.Status)) {
			continue
		}
		found = append(found, r.bytesLocked(rec))
	}
	r.mu.Unlock()
	out := make([]*Entry, 0, len(found))
	mf := f.masked() // the bytes hold the masked values (AppendJSON)
	for _, b := range found {
		e := new(Entry)
		if json.Unmarshal(b, e) != nil || !mf.Match(e) {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

var _ AuditLog = (*Ring)(nil)
