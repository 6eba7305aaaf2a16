package tracing

import "github.com/prometheus/client_golang/prometheus"

// Reasons a span is lost (the reason label of spans_dropped_total).
const (
	reasonQueueFull    = "queue_full"    // the export queue was full: the collector is slow or gone
	reasonExportFailed = "export_failed" // the collector refused the batch, did not answer in time, or is backed off
)

// metrics are the tracing pipeline's own counters, registered on the
// injected registry (SPEC 12.1 conventions: prefix switchyard_, bounded labels).
type metrics struct {
	dropped  *prometheus.CounterVec // by reason
	exported prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_tracing_spans_dropped_total",
			Help: "Spans lost before reaching the collector, by reason (queue_full, export_failed). Requests are never delayed instead.",
		}, []string{"reason"}),
		exported: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_tracing_spans_exported_total",
			Help: "Spans the OTLP collector accepted.",
		}),
	}
	// both reasons show as 0 from the start, so a rate() has a series
	m.dropped.WithLabelValues(reasonQueueFull)
	m.dropped.WithLabelValues(reasonExportFailed)
	if reg != nil {
		reg.MustRegister(m.dropped, m.exported)
	}
	return m
}
