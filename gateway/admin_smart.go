package gateway

import (
	"cmp"
	"math"
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// smartRoute is one tier alias with this node's traffic split and score
// histogram, read from the smart-routing metrics (SPEC 4, 12.1).
type smartRoute struct {
	Alias       string           `json:"alias"`
	Easy        string           `json:"easy"`
	Hard        string           `json:"hard"`
	DefaultTier string           `json:"default_tier"`
	Requests    map[string]int64 `json:"requests"` // by tier: easy, hard
	Escalations int64            `json:"escalations"`
	Scores      scoreHistogram   `json:"scores"`
}

// scoreHistogram is a cumulative histogram like Prometheus's: Buckets[i]
// counts the scores <= Le[i]; Count includes the scores above the last bound.
type scoreHistogram struct {
	Le      []float64 `json:"le"`
	Buckets []int64   `json:"buckets"`
	Count   int64     `json:"count"`
	Sum     float64   `json:"sum"`
}

// handleAdminSmartRouting answers GET /admin/smart-routing: the threshold
// and, per configured alias, its targets and this node's easy/hard split and
// score histogram since start. It is the console's source for the smart
// routing view, so the page need not parse the Prometheus text format; the
// numbers are exactly those /metrics exposes (this node only: counters are
// per process, as every Prometheus counter is).
func (s *Server) handleAdminSmartRouting(c *gin.Context) {
	snap := s.Catalog.Load()
	routes := make([]smartRoute, 0, len(snap.Routes))
	for alias, r := range snap.Routes {
		sr := smartRoute{Alias: alias, Easy: r.Easy, Hard: r.Hard, DefaultTier: cmp.Or(r.DefaultTier, "easy"),
			Requests: map[string]int64{}}
		if s.Metrics != nil {
			for _, t := range []string{"easy", "hard"} {
				sr.Requests[t] = counterValue(s.Metrics.SmartRequests.WithLabelValues(alias, t))
			}
			sr.Escalations = counterValue(s.Metrics.SmartEscalations.WithLabelValues(alias))
			sr.Scores = histogramValue(s.Metrics.SmartScore.WithLabelValues(alias))
		}
		routes = append(routes, sr)
	}
	slices.SortFunc(routes, func(a, b smartRoute) int { return cmp.Compare(a.Alias, b.Alias) })
	threshold := 0
	if t := s.classifier(); t != nil {
		threshold = t.Threshold()
	}
	c.JSON(http.StatusOK, gin.H{"node": s.Config.Server.NodeID, "threshold": threshold, "routes": routes})
}

func counterValue(c prometheus.Counter) int64 {
	var m dto.Metric
	if c.Write(&m) != nil || m.Counter == nil {
		return 0
	}
	return int64(math.Round(m.Counter.GetValue()))
}

func histogramValue(o prometheus.Observer) scoreHistogram {
	h := scoreHistogram{Le: []float64{}, Buckets: []int64{}}
	m, ok := o.(prometheus.Metric)
	if !ok {
		return h
	}
	var pb dto.Metric
	if m.Write(&pb) != nil || pb.Histogram == nil {
		return h
	}
	for _, b := range pb.Histogram.Bucket {
		h.Le = append(h.Le, b.GetUpperBound())
		h.Buckets = append(h.Buckets, int64(b.GetCumulativeCount()))
	}
	h.Count, h.Sum = int64(pb.Histogram.GetSampleCount()), pb.Histogram.GetSampleSum()
	return h
}
