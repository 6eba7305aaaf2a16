package telemetry

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CounterTable is a counter vector for the per-team series of SPEC 12.1
// (requests, tokens, cost, edge rejections), whose number grows with the
// teams: with 10,000 teams a prometheus.CounterVec held about ten heap
// objects per series (label pairs, descriptors, the counter), half a
// million objects the garbage collector marked on every cycle. A table
// holds one map entry and one counter per series, and builds the exported
// metrics only when scraped. Label values are kept as given (the strings
// the caller already holds). Safe for concurrent use.
type CounterTable struct {
	desc   *prometheus.Desc
	labels int

	mu     sync.RWMutex
	series map[[3]string]*Counter // guarded by mu
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
func NewCounterTable(opts prometheus.CounterOpts, labels ...string) *CounterTable {
	if len(labels) == 0 || len(labels) > 3 {
		panic("telemetry: a CounterTable has one to three labels")
	}
	name := prometheus.BuildFQName(opts.Namespace, opts.Subsystem, opts.Name)
	return &CounterTable{
		desc:   prometheus.NewDesc(name, opts.Help, labels, opts.ConstLabels),
		labels: len(labels),
		series: map[[3]string]*Counter{},
	}
}

// WithLabelValues returns the series of these label values (one per label,
// in order), creating it at zero.
func (t *CounterTable) WithLabelValues(values ...string) *Counter {
	var k [3]string
	copy(k[:], values)
	t.mu.RLock()
	c := t.series[k]
	t.mu.RUnlock()
	if c != nil {
		return c
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c = t.series[k]; c == nil {
		c = &Counter{created: time.Now().UnixNano()}
		t.series[k] = c
	}
	return c
}

// Values calls fn with the value of label i of every series (a value once
// per series, so repeats are possible).
func (t *CounterTable) Values(i int, fn func(value string)) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for k := range t.series {
		fn(k[i])
	}
}

// Forget deletes, in one pass, the series whose value of label i drop
// reports, and returns how many it deleted. A *Counter taken before still
// counts, unexported: forget only series nothing adds to any more.
func (t *CounterTable) Forget(i int, drop func(value string) bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k := range t.series {
		if drop(k[i]) {
			delete(t.series, k)
			n++
		}
	}
	return n
}

// Describe implements prometheus.Collector.
func (t *CounterTable) Describe(ch chan<- *prometheus.Desc) { ch <- t.desc }

// Collect implements prometheus.Collector.
func (t *CounterTable) Collect(ch chan<- prometheus.Metric) {
	type row struct {
		k [3]string
		c *Counter
	}
	t.mu.RLock()
	rows := make([]row, 0, len(t.series))
	for k, c := range t.series {
		rows = append(rows, row{k, c})
	}
	t.mu.RUnlock()
	for _, r := range rows {
		ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(t.desc, prometheus.CounterValue, r.c.Value(), time.Unix(0, r.c.created), r.k[:t.labels]...)
	}
}
