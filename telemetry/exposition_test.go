package telemetry

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestWriteTextMatchesGather: a table written series by series is the text
// client_golang's encoder makes of the same table gathered through a
// registry (HELP, TYPE, label order, escaping, values), line for line.
func TestWriteTextMatchesGather(t *testing.T) {
	tab := NewCounterTable(prometheus.CounterOpts{Name: "x_total", Help: "Help with a \\ and\na newline.", ConstLabels: prometheus.Labels{"node": "n1"}},
		"model", "team", "status")
	tab.WithLabelValues("m", "t1", "200").Add(3)
	tab.WithLabelValues("m", "t1", "429").Inc()
	tab.WithLabelValues(`a "quoted" \ model`+"\n", "t2", "200").Add(0.25)
	tab.WithLabelValues("m", "t3", "500").Add(1e21)
	tab.WithLabelValues("m", "t4", "200") // a series at 0

	reg := prometheus.NewRegistry()
	reg.MustRegister(tab)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	enc := expfmt.NewEncoder(&want, textFormat)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	var got bytes.Buffer
	if err := tab.WriteText(&got); err != nil {
		t.Fatal(err)
	}
	// the same lines; series in another order (a scraper does not care)
	lines := func(b *bytes.Buffer) []string {
		l := strings.Split(strings.TrimSpace(b.String()), "\n")
		slices.Sort(l)
		return l
	}
	if g, w := lines(&got), lines(&want); !slices.Equal(g, w) {
		t.Fatalf("WriteText:\n%s\nclient_golang:\n%s", strings.Join(g, "\n"), strings.Join(w, "\n"))
	}
	if !strings.HasPrefix(got.String(), "# HELP x_total ") {
		t.Fatalf("HELP and TYPE come first:\n%s", got.String())
	}

	var empty bytes.Buffer
	if err := NewCounterTable(prometheus.CounterOpts{Name: "y_total"}, "team").WriteText(&empty); err != nil || empty.Len() != 0 {
		t.Fatalf("a table without series wrote %q (%v)", empty.String(), err)
	}
}

// TestWriteTextAllocs: writing 30,000 series allocates the same few
// objects as writing three (the row list and one buffer), never an object
// per series: the scrape of 10,000 teams is what SPEC 16's memory figure
// pays for.
func TestWriteTextAllocs(t *testing.T) {
	tab := teamsTable(10000)
	if n := testing.AllocsPerRun(5, func() { _ = tab.WriteText(io.Discard) }); n > 4 {
		t.Fatalf("%.0f allocations to write 30,000 series, want at most 4", n)
	}
}

// TestHandler: /metrics serves the registry's families and the tables'
// series in the text format, gzip-compressed when asked, parseable by
// Prometheus's own parser.
func TestHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "plain_total", Help: "a registered counter"})
	c.Add(7)
	reg.MustRegister(c)
	tab := NewCounterTable(prometheus.CounterOpts{Name: "per_team_total", Help: "a table"}, "team", "kind")
	tab.WithLabelValues("t1", "rpm").Add(2)
	tab.WithLabelValues("t2", "tpm").Add(5)
	srv := httptest.NewServer(Handler(reg, []*CounterTable{tab}, nil))
	defer srv.Close()

	for _, gz := range []bool{false, true} {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		if gz {
			req.Header.Set("Accept-Encoding", "gzip")
		} else {
			req.Header.Set("Accept-Encoding", "identity")
		}
		resp, err := http.DefaultTransport.RoundTrip(req) // no transparent decompression
		if err != nil {
			t.Fatal(err)
		}
		var body io.Reader = resp.Body
		if gz {
			if resp.Header.Get("Content-Encoding") != "gzip" {
				t.Fatalf("gzip asked, Content-Encoding %q", resp.Header.Get("Content-Encoding"))
			}
			if body, err = gzip.NewReader(resp.Body); err != nil {
				t.Fatal(err)
			}
		} else if resp.Header.Get("Content-Encoding") != "" {
			t.Fatalf("identity asked, Content-Encoding %q", resp.Header.Get("Content-Encoding"))
		}
		if ct := resp.Header.Get("Content-Type"); ct != string(textFormat) {
			t.Fatalf("Content-Type %q", ct)
		}
		p := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := p.TextToMetricFamilies(body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if v := fams["plain_total"].GetMetric()[0].GetCounter().GetValue(); v != 7 {
			t.Fatalf("plain_total %v", v)
		}
		got := map[string]float64{}
		for _, m := range fams["per_team_total"].GetMetric() {
			got[m.GetLabel()[1].GetValue()+"/"+m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
		if len(got) != 2 || got["t1/rpm"] != 2 || got["t2/tpm"] != 5 {
			t.Fatalf("per_team_total %v", got)
		}
	}
}

// TestAcceptsGzip: the Accept-Encoding values scrapers send.
func TestAcceptsGzip(t *testing.T) {
	for v, want := range map[string]bool{
		"gzip": true, "gzip, deflate": true, "deflate, GZIP;q=0.5": true, "identity": false, "": false,
		"gzip;q=0": false, "br, gzip;q=0.0": false, "x-gzip": false,
	} {
		if acceptsGzip(v) != want {
			t.Errorf("%q: %v", v, !want)
		}
	}
}

// teamsTable is a tokens table of teams teams with three series each.
func teamsTable(teams int) *CounterTable {
	tab := NewCounterTable(prometheus.CounterOpts{Name: "tokens_total", Help: "h"}, "team", "deployment", "direction")
	for i := range teams {
		team := "team-" + strconv.Itoa(i)
		tab.WithLabelValues(team, "d1", "prompt").Add(float64(i))
		tab.WithLabelValues(team, "d1", "completion").Add(float64(2 * i))
		tab.WithLabelValues(team, "d2", "prompt").Add(1)
	}
	return tab
}

// TestHandlerScrapeBytes: a scrape of 30,000 table series allocates well
// under a megabyte (gathered through the registry, the same series were
// built as metric objects first: 27 MB a scrape, measured with promhttp).
func TestHandlerScrapeBytes(t *testing.T) {
	tab := teamsTable(10000)
	h := Handler(prometheus.NewRegistry(), []*CounterTable{tab}, nil)
	scrape := func() int {
		w := &scrapeCounter{h: http.Header{}}
		h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		return w.n
	}
	scrape() // warm
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n := scrape()
	runtime.ReadMemStats(&after)
	if n < 30000*30 {
		t.Fatalf("scrape wrote %d bytes: the series are missing", n)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("a scrape of 30,000 series allocated %d bytes, want under 1 MiB", alloc)
	}
}

// scrapeCounter is a ResponseWriter that only counts the body's bytes.
type scrapeCounter struct {
	h http.Header
	n int
}

func (w *scrapeCounter) Header() http.Header         { return w.h }
func (w *scrapeCounter) WriteHeader(int)             {}
func (w *scrapeCounter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }
