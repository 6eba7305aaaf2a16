package telemetry

import (
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
// "team", else the first), holding that team's series in a short list; a
// series is its counter and a pointer to the other labels' values, which
// the rows share (their values are few: models, statuses, deployments,
// directions, kinds). For teams of five series each that is about 290 B
// per team where a map entry of three labels per series took 584 B
// (TestCounterTableBytesPerTeam). The exported metrics are built only when
// scraped. Label
// values are kept as given (the strings the caller already holds). Safe
// for concurrent use.
type CounterTable struct {
	// Immutable after construction.
	desc   *prometheus.Desc
	labels int // 1 to 3
	row    int // index of the row label
	// name, help and sorted are what WriteText writes (exposition.go)
	name, help string
	sorted     []exposedLabel

	mu    sync.RWMutex
	rows  map[string]*CounterRow   // guarded by mu; by the row label's value
	rests map[[2]string]*[2]string // guarded by mu; the other labels' values, shared by the rows' series
}

// CounterRow is the series of a CounterTable that share one value of its
// row label: one team's. A caller that counts for a team again and again
// keeps its row (the table's lookup by team is a cache miss per request
// with 10,000 teams) and finds the series in it.
type CounterRow struct {
	// Immutable after construction.
	table *CounterTable
	value string

	// head is the newest series; the list is linked and unlinked under
	// table.mu and read without a lock.
	head atomic.Pointer[series]
	// chunk holds series made ahead, of which used are taken (guarded by
	// table.mu): a row's series after its first are made a few at a time,
	// one object per chunk instead of one each (with 10,000 teams, 50,000
	// objects fewer for the collector to mark).
	chunk *[seriesChunk]series
	used  int
}

// seriesChunk is how many series a row makes at a time after its first
// (a team's tokens: two deployments, prompt and completion, fill one).
const seriesChunk = 3

// series is one series of a row.
type series struct {
	rest *[2]string // the other labels' values, in label order; shared
	next atomic.Pointer[series]
	Counter
}

// rowAndSeries is a row made with its first series, in one allocation:
// most teams count one series per table.
type rowAndSeries struct {
	CounterRow
	first series
}

// Counter is one series of a CounterTable.
type Counter struct {
	bits    atomic.Uint64
	created int64 // Unix ns, exported as the series' created timestamp like a CounterVec's (no pointer: the GC never scans a Counter)
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
	return &CounterTable{
		desc: prometheus.NewDesc(name, opts.Help, labels, opts.ConstLabels),
		name: name, help: opts.Help, sorted: sortedLabels(labels, opts.ConstLabels),
		labels: len(labels),
		row:    max(slices.Index(labels, "team"), 0),
		rows:   map[string]*CounterRow{},
		rests:  map[[2]string]*[2]string{},
	}
}

// split returns the row label's value of values and the others in order.
func (t *CounterTable) split(values []string) (row string, rest [2]string) {
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
	t.mu.RLock()
	r := t.rows[v]
	t.mu.RUnlock()
	if r != nil {
		return r.with(rest)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r = t.rows[v]; r != nil {
		return r.withLocked(rest)
	}
	rs := &rowAndSeries{CounterRow: CounterRow{table: t, value: v}}
	rs.first = series{rest: t.restLocked(rest), Counter: Counter{created: time.Now().UnixNano()}}
	rs.head.Store(&rs.first)
	t.rows[v] = &rs.CounterRow
	return &rs.first.Counter
}

// Row returns the row of the row label's value v, creating it empty.
func (t *CounterTable) Row(v string) *CounterRow {
	t.mu.RLock()
	r := t.rows[v]
	t.mu.RUnlock()
	if r != nil {
		return r
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r = t.rows[v]; r == nil {
		r = &CounterRow{table: t, value: v}
		t.rows[v] = r
	}
	return r
}

// restLocked is the shared copy of the other labels' values rest.
func (t *CounterTable) restLocked(rest [2]string) *[2]string {
	p := t.rests[rest]
	if p == nil {
		p = new([2]string) // not &rest: rest would escape on every call
		*p = rest
		t.rests[rest] = p
	}
	return p
}

// Table is the table the row belongs to.
func (r *CounterRow) Table() *CounterTable { return r.table }

// With returns the row's series of the other labels' values (in label
// order, the row label left out), creating it at zero. A row the table
// forgot (Forget) still counts, unexported.
func (r *CounterRow) With(values ...string) *Counter {
	var rest [2]string
	copy(rest[:], values)
	return r.with(rest)
}

func (r *CounterRow) with(rest [2]string) *Counter {
	if c := r.find(rest); c != nil {
		return c
	}
	r.table.mu.Lock()
	defer r.table.mu.Unlock()
	return r.withLocked(rest)
}

func (r *CounterRow) find(rest [2]string) *Counter {
	for s := r.head.Load(); s != nil; s = s.next.Load() {
		if *s.rest == rest {
			return &s.Counter
		}
	}
	return nil
}

func (r *CounterRow) withLocked(rest [2]string) *Counter {
	if c := r.find(rest); c != nil {
		return c
	}
	if r.chunk == nil || r.used == seriesChunk {
		r.chunk, r.used = new([seriesChunk]series), 0
	}
	s := &r.chunk[r.used]
	r.used++
	s.rest, s.created = r.table.restLocked(rest), time.Now().UnixNano()
	s.next.Store(r.head.Load())
	r.head.Store(s)
	return &s.Counter
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
	for v, r := range t.rows {
		if i == t.row {
			if r.head.Load() != nil {
				fn(v)
			}
			continue
		}
		for s := r.head.Load(); s != nil; s = s.next.Load() {
			fn(s.rest[t.restIndex(i)])
		}
	}
}

// Forget deletes, in one pass, the series whose value of label i drop
// reports, and returns how many it deleted. A *Counter or *CounterRow
// taken before still counts, unexported: forget only series nothing adds
// to any more.
func (t *CounterTable) Forget(i int, drop func(value string) bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for v, r := range t.rows {
		if i == t.row {
			if drop(v) {
				for s := r.head.Load(); s != nil; s = s.next.Load() {
					n++
				}
				delete(t.rows, v)
			}
			continue
		}
		// unlinking leaves a removed series' next as it was, so a reader
		// standing on it walks on
		var prev *series
		for s := r.head.Load(); s != nil; s = s.next.Load() {
			if !drop(s.rest[t.restIndex(i)]) {
				prev = s
				continue
			}
			if prev == nil {
				r.head.Store(s.next.Load())
			} else {
				prev.next.Store(s.next.Load())
			}
			n++
		}
	}
	return n
}

// Describe implements prometheus.Collector.
func (t *CounterTable) Describe(ch chan<- *prometheus.Desc) { ch <- t.desc }

// Collect implements prometheus.Collector. The label values of a series
// are put together here, at scrape time.
func (t *CounterTable) Collect(ch chan<- prometheus.Metric) {
	t.mu.RLock()
	rows := make([]*CounterRow, 0, len(t.rows))
	for _, r := range t.rows {
		rows = append(rows, r)
	}
	t.mu.RUnlock()
	var lv [3]string
	for _, r := range rows {
		for s := r.head.Load(); s != nil; s = s.next.Load() {
			j := 0
			for i := range t.labels {
				if i == t.row {
					lv[i] = r.value
				} else {
					lv[i] = s.rest[j]
					j++
				}
			}
			ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(t.desc, prometheus.CounterValue, s.Value(), time.Unix(0, s.created), lv[:t.labels]...)
		}
	}
}
