package responses

import (
	"container/list"
	"context"
	"sync"
	"time"

	"switchyard/wire"
)

// Local is the node-local store: at most max responses and maxBytes bytes
// (Record sizes as localSize counts them), each kept for ttl, the oldest
// evicted first. Since every record lives the same ttl, insertion order is
// expiry order, so eviction and expiry are both taken from the front of one
// list. A record larger than maxBytes on its own is not kept.
type Local struct {
	// immutable after NewLocal
	now      func() time.Time
	ttl      time.Duration
	max      int
	maxBytes int64

	mu    sync.Mutex
	recs  map[string]*localRec // guarded by mu; team\x00id -> record
	order *list.List           // guarded by mu; of *localRec, oldest first
	bytes int64                // guarded by mu; sum of the records' sizes
}

type localRec struct {
	key  string
	rec  *Record
	size int64 // localSize(rec)
	text int64 // rec.ItemsSize(), for Load's budget
	exp  time.Time
	elem *list.Element
	// shared: the shared store (Redis) has this record; it is the
	// authority on it from then on (a delete on another node). Only Redis
	// sets it.
	shared bool
}

// NewLocal returns a local store on clock now.
func NewLocal(now func() time.Time, cfg Config) *Local {
	if cfg.MaxLocal < 1 {
		cfg.MaxLocal = 1
	}
	if cfg.MaxLocalBytes < 1 {
		cfg.MaxLocalBytes = 256 << 20
	}
	return &Local{now: now, ttl: cfg.TTL, max: cfg.MaxLocal, maxBytes: cfg.MaxLocalBytes, recs: map[string]*localRec{}, order: list.New()}
}

func scoped(team, id string) string { return team + "\x00" + id }

// localSize is what a record holds in memory, near enough to bound the
// store in bytes: its strings and a fixed cost per record, item and part.
func localSize(team string, rec *Record) int64 {
	n := int64(recordOverhead + 2*len(team) + 2*len(rec.ID) + len(rec.Session) + len(rec.Prev) + len(rec.Response))
	n += int64(itemOverhead * (len(rec.Input) + len(rec.Output)))
	for _, items := range [][]wire.Item{rec.Input, rec.Output} {
		for i := range items {
			n += int64(partOverhead * len(items[i].Content))
		}
	}
	return n + rec.ItemsSize()
}

// Save implements Store.
func (l *Local) Save(team string, rec *Record) {
	now := l.now()
	key := scoped(team, rec.ID)
	size := localSize(team, rec)
	l.mu.Lock()
	defer l.mu.Unlock()
	if old := l.recs[key]; old != nil {
		l.removeLocked(old)
	}
	if size > l.maxBytes {
		return // it would evict everything and still not fit
	}
	lr := &localRec{key: key, rec: rec, size: size, text: rec.ItemsSize(), exp: now.Add(l.ttl)}
	lr.elem = l.order.PushBack(lr)
	l.recs[key] = lr
	l.bytes += size
	l.evictLocked(now)
}

// evictLocked drops expired records and, past max or maxBytes, the oldest.
func (l *Local) evictLocked(now time.Time) {
	for f := l.order.Front(); f != nil; f = l.order.Front() {
		lr := f.Value.(*localRec)
		if len(l.recs) <= l.max && l.bytes <= l.maxBytes && now.Before(lr.exp) {
			return
		}
		l.removeLocked(lr)
	}
}

func (l *Local) removeLocked(lr *localRec) {
	l.order.Remove(lr.elem)
	delete(l.recs, lr.key)
	l.bytes -= lr.size
}

// localRead is what one look in the local store found.
type localRead struct {
	chain   []*Record // the turns found, newest first
	next    string    // the first turn not here; "" when the chain is whole
	used    int64     // what the chain's items add (Record.ItemsSize)
	items   map[string]wire.Item
	missing []string // refs whose response is not here
	// shared are the chain's turns found here that the shared store has
	// (localRec.shared), and sharedRefs the refs found in such turns: the
	// shared store is the authority on them (a delete or an eviction on
	// another node), so Redis.Load checks they are still there
	shared     []string
	sharedRefs []string
}

// read follows the chain from prev back while this store holds its turns,
// within b, and looks up refs. It stops with ErrTooLarge or ErrTooDeep
// before taking a turn past b.
func (l *Local) read(team, prev string, refs []string, b Budget) (localRead, error) {
	var rd localRead
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evictLocked(now) // what is left has not expired
	for id := prev; id != ""; {
		lr := l.recs[scoped(team, id)]
		if lr == nil {
			rd.next = id
			break
		}
		if len(rd.chain) >= max(b.Depth, 1) {
			return localRead{}, ErrTooDeep
		}
		if rd.used += lr.text; rd.used > b.Bytes {
			return localRead{}, ErrTooLarge
		}
		rd.chain = append(rd.chain, lr.rec)
		if lr.shared {
			rd.shared = append(rd.shared, id)
		}
		id = lr.rec.Prev
	}
	for _, ref := range refs {
		if _, ok := rd.items[ref]; ok {
			continue
		}
		rid, ok := ItemResponse(ref)
		if !ok {
			continue // not an id the gateway gave: never stored
		}
		lr := l.recs[scoped(team, rid)]
		if lr == nil {
			rd.missing = append(rd.missing, ref)
			continue
		}
		if it, ok := lr.rec.item(ref); ok {
			if rd.items == nil {
				rd.items = make(map[string]wire.Item)
			}
			rd.items[ref] = it
			if lr.shared {
				rd.sharedRefs = append(rd.sharedRefs, ref)
			}
		}
	}
	return rd, nil
}

// oldestFirst reverses a chain read newest first.
func oldestFirst(chain []*Record) []*Record {
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain
}

// Load implements Store.
func (l *Local) Load(_ context.Context, team, prev string, refs []string, b Budget) (Lookup, error) {
	rd, err := l.read(team, prev, refs, b)
	if err != nil {
		return Lookup{}, err
	}
	if rd.next != "" {
		return Lookup{}, &MissingError{ID: rd.next}
	}
	return Lookup{Chain: oldestFirst(rd.chain), Items: rd.items}, nil
}

// get returns the record of id, or nil.
func (l *Local) get(team, id string) *Record {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evictLocked(now)
	if lr := l.recs[scoped(team, id)]; lr != nil {
		return lr.rec
	}
	return nil
}

// Get implements Store.
func (l *Local) Get(_ context.Context, team, id string) (*Record, error) {
	if rec := l.get(team, id); rec != nil {
		return rec, nil
	}
	return nil, ErrNotFound
}

// Input implements Store.
func (l *Local) Input(_ context.Context, team, id string) ([]wire.Item, error) {
	if rec := l.get(team, id); rec != nil {
		return rec.Input, nil
	}
	return nil, ErrNotFound
}

// lookup is get with whether the record was written to the shared store.
func (l *Local) lookup(team, id string) (rec *Record, shared bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evictLocked(now)
	if lr := l.recs[scoped(team, id)]; lr != nil {
		return lr.rec, lr.shared
	}
	return nil, false
}

// markShared records that rec, saved for team, is in the shared store now
// (a no-op when it was deleted or replaced meanwhile).
func (l *Local) markShared(team string, rec *Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lr := l.recs[scoped(team, rec.ID)]; lr != nil && lr.rec == rec {
		lr.shared = true
	}
}

// drop removes rec, saved for team, when it is still the record held (the
// shared store no longer has it: deleted or evicted on another node).
func (l *Local) drop(team string, rec *Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lr := l.recs[scoped(team, rec.ID)]; lr != nil && lr.rec == rec {
		l.removeLocked(lr)
	}
}

// remove is Delete, also reporting whether the record removed had been
// written to the shared store.
func (l *Local) remove(team, id string) (found, shared bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lr := l.recs[scoped(team, id)]
	if lr == nil || !l.now().Before(lr.exp) {
		return false, false
	}
	l.removeLocked(lr)
	return true, lr.shared
}

// Delete implements Store: the record only; earlier turns it links to and
// items it referenced belong to their own responses and stay.
func (l *Local) Delete(_ context.Context, team, id string) (bool, error) {
	found, _ := l.remove(team, id)
	return found, nil
}

// Len reports the records held (tests, metrics).
func (l *Local) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recs)
}

// Bytes reports the bytes held as the bound counts them (tests, metrics).
func (l *Local) Bytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes
}

// Close implements Store.
func (l *Local) Close(context.Context) error { return nil }

var _ Store = (*Local)(nil)
