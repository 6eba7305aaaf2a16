package telemetry

// The /metrics exposition (SPEC 12.1): the registry's families encoded as
// client_golang does, and the per-team tables written series by series
// straight into the response. Gathering a table through the registry built
// every series as a metric object first (a const metric, its label pairs,
// a dto.Metric, a hash for the duplicate check): with 10,000 teams that was
// 45,000 series and about 25 MB live during each scrape, which moved the
// node's heap goal with it (RSS 135 -> 193 MB over three scrapes a second
// apart, against SPEC 16's 150 MB).

import (
	"bufio"
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// textFormat is the exposition's content type: Prometheus's text format
// 0.0.4, which every scraper accepts.
var textFormat = expfmt.NewFormat(expfmt.TypeTextPlain)

// Handler serves GET /metrics: reg's families, then the tables' series,
// in the text format, gzip-compressed when the scraper accepts it. The
// tables must not be registered on reg (NewMetrics keeps its tables off
// the registry). onError, when set, is told of a gathering error; the
// families that were gathered are still served, as promhttp does with
// ContinueOnError.
func Handler(reg prometheus.Gatherer, tables []*CounterTable, onError func(error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var mfs []*dto.MetricFamily
		var err error
		if reg != nil {
			mfs, err = reg.Gather()
		}
		if err != nil && onError != nil {
			onError(err)
		}
		h := w.Header()
		h.Set("Content-Type", string(textFormat))
		var out io.Writer = w
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			h.Set("Content-Encoding", "gzip")
			h.Add("Vary", "Accept-Encoding")
			gz := gzip.NewWriter(w)
			defer gz.Close()
			out = gz
		}
		bw := bufio.NewWriterSize(out, 32<<10)
		enc := expfmt.NewEncoder(bw, textFormat)
		for _, mf := range mfs {
			if enc.Encode(mf) != nil {
				return // the scraper is gone
			}
		}
		for _, t := range tables {
			if t.WriteText(bw) != nil {
				return
			}
		}
		_ = bw.Flush()
	})
}

// acceptsGzip reports whether an Accept-Encoding value lists gzip with a
// non-zero quality.
func acceptsGzip(v string) bool {
	for part := range strings.SplitSeq(v, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		q := strings.TrimSpace(params)
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

// WriteText writes the table's series to w in the text format, as
// client_golang's encoder writes a gathered family (HELP and TYPE, labels
// sorted by name, values escaped the same way, no created timestamp: the
// text format has none), without building them first: its allocations do
// not grow with the series. Nothing is written for a table without series.
func (t *CounterTable) WriteText(w io.Writer) error {
	buf := make([]byte, 0, 16<<10)
	wrote := false
	var err error
	for _, r := range t.snapshot() {
		r.each(func(s *slot, rest *restValues) bool {
			if !wrote {
				buf = t.appendHeader(buf)
				wrote = true
			}
			buf = t.appendSeries(buf, r.value, rest, &s.Counter)
			if len(buf) >= 12<<10 {
				_, err = w.Write(buf)
				buf = buf[:0]
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	if len(buf) > 0 {
		_, err := w.Write(buf)
		return err
	}
	return nil
}

func (t *CounterTable) appendHeader(b []byte) []byte {
	if t.help != "" {
		b = append(b, "# HELP "...)
		b = append(b, t.name...)
		b = append(b, ' ')
		b = appendEscaped(b, t.help, false)
		b = append(b, '\n')
	}
	b = append(b, "# TYPE "...)
	b = append(b, t.name...)
	return append(b, " counter\n"...)
}

// appendSeries appends one line: the name, the labels in name order and
// the value.
func (t *CounterTable) appendSeries(b []byte, row string, rest *restValues, c *Counter) []byte {
	b = append(b, t.name...)
	b = append(b, '{')
	for k, l := range t.sorted {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, l.name...)
		b = append(b, `="`...)
		v := l.value
		switch {
		case l.index == t.row:
			v = row
		case l.index >= 0:
			v = rest[t.restIndex(l.index)]
		}
		b = appendEscaped(b, v, true)
		b = append(b, '"')
	}
	b = append(b, "} "...)
	return append(appendSampleValue(b, c.Value()), '\n')
}

// appendEscaped escapes as the text format does: backslash and newline,
// and in a label value the double quote.
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendSampleValue formats a value as the text format does.
func appendSampleValue(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, +1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// exposedLabel is one label of a table's series in name order: a variable
// label (index into the table's labels) or a constant one (index -1, its
// value).
type exposedLabel struct {
	name, value string
	index       int
}

// sortedLabels is the labels of a table with variable labels names and
// constant labels consts, in name order (the text format's).
func sortedLabels(names []string, consts prometheus.Labels) []exposedLabel {
	out := make([]exposedLabel, 0, len(names)+len(consts))
	for i, n := range names {
		out = append(out, exposedLabel{name: n, index: i})
	}
	for n, v := range consts {
		out = append(out, exposedLabel{name: n, value: v, index: -1})
	}
	slices.SortFunc(out, func(a, b exposedLabel) int { return strings.Compare(a.name, b.name) })
	return out
}
