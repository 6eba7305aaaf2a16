package responses

import (
	"container/list"
	"context"
	"sync"
	"time"

	"switchyard/wire"
)

// Local is the node-local store: at most max responses, each kept for ttl,
// the oldest evicted first (with its indexed items). Since every record
// lives the same ttl, insertion order is expiry order, so eviction and
// expiry are both taken from the front of one list.
type Local struct {
	// immutable after NewLocal
	now func() time.Time
	ttl time.Duration
	max int

	mu    sync.Mutex
	recs  map[string]*localRec // guarded by mu; team\x00id -> record
	items map[string]wire.Item // guarded by mu; team\x00item id -> item
	order *list.List           // guarded by mu; of *localRec, oldest first
}

type localRec struct {
	key      string
	rec      *Record
	exp      time.Time
	elem     *list.Element
	itemKeys []string
}

// NewLocal returns a local store on clock now.
func NewLocal(now func() time.Time, cfg Config) *Local {
	if cfg.MaxLocal < 1 {
		cfg.MaxLocal = 1
	}
	return &Local{now: now, ttl: cfg.TTL, max: cfg.MaxLocal, recs: map[string]*localRec{}, items: map[string]wire.Item{}, order: list.New()}
}

func scoped(team, id string) string { return team + "\x00" + id }

// Save implements Store.
func (l *Local) Save(team string, rec *Record) {
	now := l.now()
	key := scoped(team, rec.ID)
	l.mu.Lock()
	defer l.mu.Unlock()
	if old := l.recs[key]; old != nil {
		l.removeLocked(old)
	}
	lr := &localRec{key: key, rec: rec, exp: now.Add(l.ttl)}
	for i := max(rec.First, 0); i < len(rec.Items); i++ {
		if id := rec.Items[i].ID; id != "" {
			k := scoped(team, id)
			l.items[k] = rec.Items[i]
			lr.itemKeys = append(lr.itemKeys, k)
		}
	}
	lr.elem = l.order.PushBack(lr)
	l.recs[key] = lr
	l.evictLocked(now)
}

// evictLocked drops expired records and, past max, the oldest.
func (l *Local) evictLocked(now time.Time) {
	for f := l.order.Front(); f != nil; f = l.order.Front() {
		lr := f.Value.(*localRec)
		if len(l.recs) <= l.max && now.Before(lr.exp) {
			return
		}
		l.removeLocked(lr)
	}
}

func (l *Local) removeLocked(lr *localRec) {
	l.order.Remove(lr.elem)
	delete(l.recs, lr.key)
	for _, k := range lr.itemKeys {
		delete(l.items, k)
	}
}

// lookup reads what is here and lists what is not: prevMissing and the
// refs not found.
func (l *Local) lookup(team, prev string, refs []string) (lk Lookup, prevMissing bool, missing []string) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evictLocked(now)
	if prev != "" {
		if lr := l.recs[scoped(team, prev)]; lr != nil {
			lk.Previous = lr.rec
		} else {
			prevMissing = true
		}
	}
	for _, id := range refs {
		if it, ok := l.items[scoped(team, id)]; ok {
			if lk.Items == nil {
				lk.Items = make(map[string]wire.Item, len(refs))
			}
			lk.Items[id] = it
		} else {
			missing = append(missing, id)
		}
	}
	return lk, prevMissing, missing
}

// Load implements Store.
func (l *Local) Load(_ context.Context, team, prev string, refs []string) (Lookup, error) {
	lk, prevMissing, _ := l.lookup(team, prev, refs)
	if prevMissing {
		return Lookup{}, ErrNotFound
	}
	return lk, nil
}

// Get implements Store.
func (l *Local) Get(_ context.Context, team, id string) (*Record, error) {
	lk, prevMissing, _ := l.lookup(team, id, nil)
	if prevMissing {
		return nil, ErrNotFound
	}
	return lk.Previous, nil
}

// Delete implements Store.
func (l *Local) Delete(_ context.Context, team, id string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lr := l.recs[scoped(team, id)]
	if lr == nil || !l.now().Before(lr.exp) {
		return false, nil
	}
	l.removeLocked(lr)
	return true, nil
}

// Len reports the records held (tests, metrics).
func (l *Local) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recs)
}

// Close implements Store.
func (l *Local) Close(context.Context) error { return nil }

var _ Store = (*Local)(nil)
