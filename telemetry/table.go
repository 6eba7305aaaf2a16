package telemetry

import (
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CounterTable is a counter vector for the per-team series of SPEC 12.1
// (requests, tokens, cost, edge rejections), whose number grows with the
// teams: with 10,000 teams a prometheus.CounterVec held about ten heap
// objects per series (label pairs, descriptors, the counter), half a
// million objects the garbage collector marked on every cycle.
//
// A table keeps one CounterRow per value of its row label (the label named
// "team", else the first), holding that team's series in its own slots:
// one object a team with three pointers (table, value, overflow) and none
// in its counters. A slot is a counter and the index of the other labels'
// values in the table's list of them (their values are few: models,
// statuses, deployments, directions, kinds). Rows are found through a map
// of their values' hashes, which holds no pointers. For 10,000 teams of five series in two
// tables that is two objects and about 280 B a team
// (TestCounterTableBytesPerTeam), and a full collection marks them in a
// third of the time it took with a map by value and a chunk of linked
// series objects a team (BenchmarkMarkTeamTables). The exported metrics
// are built only when scraped. Label values are kept as given (the
// strings the caller already holds). Safe for concurrent use.
type CounterTable struct {
	// Immutable after construction.
	desc   *prometheus.Desc
	labels int // 1 to 3
	row    int // index of the row label
	// name, help and sorted are what WriteText writes (exposition.go)
	name, help string
	sorted     []exposedLabel
	start      time.Time // a slot's created second counts from it

	// rests is the list of the other labels' values a slot's rest indexes:
	// appended to (a new list) under mu, read without a lock.
	rests atomic.Pointer[[]restValues]

	seed maphash.Seed                      // of the row values' hashes in index
	hash func(maphash.Seed, string) uint64 // maphash.String (a test makes rows collide)

	// Guarded by mu. The rows are found by their value's hash (index: a
	// map the collector does not scan, where a map by value held two
	// pointers a row) in list, a row's place in it is its pos, and rows
	// of one hash are chained through same. free are places of forgotten
	// rows, for new ones.
	mu      sync.RWMutex
	index   map[uint64]int32
	list    []*CounterRow
	free    []int32
	restIdx map[restValues]uint32 // index in rests
}

// restValues are the values of a series' labels other than the row label,
// in label order.
type restValues = [2]string

// CounterRow is the series of a CounterTable that share one value of its
// row label: one team's. A caller that counts for a team again and again
// keeps its row (the table's lookup by team is a cache miss per request
// with 10,000 teams) and finds the series in it.
type CounterRow struct {
	table *CounterTable // immutable
	value string        // immutable
	more  atomic.Pointer[slotBlock]

	// n is the slots in use: a slot is filled before n counts it, so a
	// reader that loads n sees every slot below it whole.
	n atomic.Int32
	// pos and same are the row's place in the table's list and the next
	// row of its hash there (-1: none); guarded by the table's mu.
	pos, same int32
	inline    [rowInline]slot
}

// rowInline is the slots a row holds in itself: a team's tokens on two
// deployments (prompt and completion) fit; more go to slot blocks.
const rowInline = 4

// slotBlock holds a row's slots past its inline ones, blockSlots each.
type slotBlock struct {
	next atomic.Pointer[slotBlock] // the only pointer, first
	s    [blockSlots]slot
}

const blockSlots = 8

// slot is one series of a row: its counter, the index of its other
// labels' values in the table's rests (deadRest once forgotten: the slot
// is free for the row's next new series), and when it was made (seconds
// after the table's start).
type slot struct {
	rest    atomic.Uint32
	created atomic.Uint32
	Counter
}

// deadRest marks a forgotten slot.
const deadRest = ^uint32(0)

// Counter is one series of a CounterTable.
type Counter struct {
	bits atomic.Uint64
}

// Add adds v (>= 0) to the counter.
func (c *Counter) Add(v float64) {
	for {
		old := c.bits.Load()
		if c.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Inc adds 1 to the counter.
func (c *Counter) Inc() { c.Add(1) }

// Value is the counter's current value.
func (c *Counter) Value() float64 { return math.Float64frombits(c.bits.Load()) }

// NewCounterTable returns a table named by opts with one to three labels.
// Its rows are by the label named "team", else by the first label.
func NewCounterTable(opts prometheus.CounterOpts, labels ...string) *CounterTable {
	if len(labels) == 0 || len(labels) > 3 {
		panic("telemetry: a CounterTable has one to three labels")
	}
	name := prometheus.BuildFQName(opts.Namespace, opts.Subsystem, opts.Name)
	t := &CounterTable{
		desc: prometheus.NewDesc(name, opts.Help, labels, opts.ConstLabels),
		name: name, help: opts.Help, sorted: sortedLabels(labels, opts.ConstLabels),
		labels: len(labels), start: time.Now(),
		row:     max(slices.Index(labels, "team"), 0),
		seed:    maphash.MakeSeed(),
		hash:    maphash.String,
		index:   map[uint64]int32{},
		restIdx: map[restValues]uint32{},
	}
	t.rests.Store(&[]restValues{})
	return t
}

// split returns the row label's value of values and the others in order.
func (t *CounterTable) split(values []string) (row string, rest restValues) {
	j := 0
	for i, v := range values {
		switch {
		case i == t.row:
			row = v
		case j < len(rest):
			rest[j] = v
			j++
		}
	}
	return row, rest
}

// WithLabelValues returns the series of these label values (one per label,
// in order), creating it at zero.
func (t *CounterTable) WithLabelValues(values ...string) *Counter {
	v, rest := t.split(values)
	h := t.hash(t.seed, v)
	t.mu.RLock()
	r := t.findLocked(h, v)
	t.mu.RUnlock()
	if r != nil {
		return r.with(rest)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rowLocked(h, v).withLocked(rest)
}

// Row returns the row of the row label's value v, creating it empty.
func (t *CounterTable) Row(v string) *CounterRow {
	h := t.hash(t.seed, v)
	t.mu.RLock()
	r := t.findLocked(h, v)
	t.mu.RUnlock()
	if r != nil {
		return r
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rowLocked(h, v)
}

// findLocked is the row of value v (of hash h), nil when there is none
// (mu held, for reading at least).
func (t *CounterTable) findLocked(h uint64, v string) *CounterRow {
	p, ok := t.index[h]
	for ok && p >= 0 {
		r := t.list[p]
		if r.value == v {
			return r
		}
		p = r.same
	}
	return nil
}

// rowLocked is the row of value v (of hash h), made when there is none
// (mu held).
func (t *CounterTable) rowLocked(h uint64, v string) *CounterRow {
	if r := t.findLocked(h, v); r != nil {
		return r
	}
	r := &CounterRow{table: t, value: v, same: -1}
	if p, ok := t.index[h]; ok {
		r.same = p
	}
	if n := len(t.free); n > 0 {
		r.pos, t.free = t.free[n-1], t.free[:n-1]
		t.list[r.pos] = r
	} else {
		r.pos = int32(len(t.list))
		t.list = append(t.list, r)
	}
	t.index[h] = r.pos
	return r
}

// dropLocked takes row r out of the table (mu held).
func (t *CounterTable) dropLocked(r *CounterRow) {
	h := t.hash(t.seed, r.value)
	if p := t.index[h]; p == r.pos {
		if r.same < 0 {
			delete(t.index, h)
		} else {
			t.index[h] = r.same
		}
	} else {
		prev := t.list[p]
		for prev.same != r.pos {
			prev = t.list[prev.same]
		}
		prev.same = r.same
	}
	t.list[r.pos] = nil
	t.free = append(t.free, r.pos)
}

// restLocked is the index of rest in t.rests, appended when new.
func (t *CounterTable) restLocked(rest restValues) uint32 {
	if i, ok := t.restIdx[rest]; ok {
		return i
	}
	old := *t.rests.Load()
	next := append(old[:len(old):len(old)], rest) // a new list: readers keep theirs
	i := uint32(len(old))
	t.restIdx[rest] = i
	t.rests.Store(&next)
	return i
}

// Table is the table the row belongs to.
func (r *CounterRow) Table() *CounterTable { return r.table }

// With returns the row's series of the other labels' values (in label
// order, the row label left out), creating it at zero. A row the table
// forgot (Forget) still counts, unexported.
func (r *CounterRow) With(values ...string) *Counter {
	var rest restValues
	copy(rest[:], values)
	return r.with(rest)
}

func (r *CounterRow) with(rest restValues) *Counter {
	if c := r.find(rest); c != nil {
		return c
	}
	r.table.mu.Lock()
	defer r.table.mu.Unlock()
	return r.withLocked(rest)
}

// slot is the row's slot i (< n).
func (r *CounterRow) slot(i int) *slot {
	if i < rowInline {
		return &r.inline[i]
	}
	i -= rowInline
	b := r.more.Load()
	for i >= blockSlots {
		b, i = b.next.Load(), i-blockSlots
	}
	return &b.s[i]
}

// each calls fn with every live slot of the row and its other labels'
// values, until fn returns false.
func (r *CounterRow) each(fn func(s *slot, rest *restValues) bool) {
	n := int(r.n.Load())
	rests := *r.table.rests.Load() // after n: it holds every rest of a slot below n
	for i := range n {
		s := r.slot(i)
		if ri := s.rest.Load(); ri < uint32(len(rests)) && !fn(s, &rests[ri]) {
			return
		}
	}
}

// find is the row's live series of rest, nil when it has none.
func (r *CounterRow) find(rest restValues) (c *Counter) {
	r.each(func(s *slot, v *restValues) bool {
		if *v == rest {
			c = &s.Counter
		}
		return c == nil
	})
	return c
}

// withLocked finds or makes the series (the table's mu held). A new series
// takes a forgotten slot of the row if there is one: a counter taken before
// the Forget that counts after it counts into its successor (a request in
// flight while its deployment is removed), which is zeroed when taken.
func (r *CounterRow) withLocked(rest restValues) *Counter {
	if c := r.find(rest); c != nil {
		return c
	}
	ri := r.table.restLocked(rest)
	created := uint32(min(time.Since(r.table.start)/time.Second, math.MaxUint32))
	n := int(r.n.Load())
	for i := range n {
		if s := r.slot(i); s.rest.Load() == deadRest {
			s.bits.Store(0)
			s.created.Store(created)
			s.rest.Store(ri)
			return &s.Counter
		}
	}
	if n >= rowInline && (n-rowInline)%blockSlots == 0 {
		b := new(slotBlock)
		if n == rowInline {
			r.more.Store(b)
		} else {
			last := r.more.Load()
			for last.next.Load() != nil {
				last = last.next.Load()
			}
			last.next.Store(b)
		}
	}
	s := r.slot(n)
	s.created.Store(created)
	s.rest.Store(ri)
	r.n.Store(int32(n + 1))
	return &s.Counter
}

// live reports whether the row has a series.
func (r *CounterRow) live() bool {
	found := false
	r.each(func(*slot, *restValues) bool { found = true; return false })
	return found
}

// createdAt is when slot s of the table was made.
func (t *CounterTable) createdAt(s *slot) time.Time {
	return t.start.Add(time.Duration(s.created.Load()) * time.Second)
}

// restIndex is where label i (not the row label) is in a series' rest.
func (t *CounterTable) restIndex(i int) int {
	if i > t.row {
		return i - 1
	}
	return i
}

// Values calls fn with the value of label i of every series (a value once
// per series, so repeats are possible; the row label's once per row).
func (t *CounterTable) Values(i int, fn func(value string)) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, r := range t.list {
		if r == nil {
			continue
		}
		if i == t.row {
			if r.live() {
				fn(r.value)
			}
			continue
		}
		r.each(func(_ *slot, rest *restValues) bool {
			fn(rest[t.restIndex(i)])
			return true
		})
	}
}

// Forget deletes, in one pass, the series whose value of label i drop
// reports, and returns how many it deleted. A *Counter or *CounterRow
// taken before still counts, unexported (a forgotten slot's counter until
// the row's next new series takes the slot): forget only series nothing
// adds to any more.
func (t *CounterTable) Forget(i int, drop func(value string) bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, r := range t.list {
		if r == nil {
			continue
		}
		if i == t.row {
			if drop(r.value) {
				r.each(func(*slot, *restValues) bool { n++; return true })
				t.dropLocked(r)
			}
			continue
		}
		r.each(func(s *slot, rest *restValues) bool {
			if drop(rest[t.restIndex(i)]) {
				s.rest.Store(deadRest)
				n++
			}
			return true
		})
	}
	return n
}

// snapshot is the table's rows, read under its lock and walked without it.
func (t *CounterTable) snapshot() []*CounterRow {
	t.mu.RLock()
	defer t.mu.RUnlock()
	rows := make([]*CounterRow, 0, len(t.list)-len(t.free))
	for _, r := range t.list {
		if r != nil {
			rows = append(rows, r)
		}
	}
	return rows
}

// Describe implements prometheus.Collector.
func (t *CounterTable) Describe(ch chan<- *prometheus.Desc) { ch <- t.desc }

// Collect implements prometheus.Collector. The label values of a series
// are put together here, at scrape time.
func (t *CounterTable) Collect(ch chan<- prometheus.Metric) {
	var lv [3]string
	for _, r := range t.snapshot() {
		r.each(func(s *slot, rest *restValues) bool {
			j := 0
			for i := range t.labels {
				if i == t.row {
					lv[i] = r.value
				} else {
					lv[i] = rest[j]
					j++
				}
			}
			ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(t.desc, prometheus.CounterValue, s.Value(), t.createdAt(s), lv[:t.labels]...)
			return true
		})
	}
}
