package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"switchyard/telemetry"
)

// Live usage per team and the recent requests list (SPEC 11).

// Default and largest page of GET /admin/requests (SPEC 11).
const (
	requestsDefault = 50
	requestsMax     = 500
)

// handleTeamUsage is GET /admin/teams/{name}/usage: the team's live state
// against its limits, cluster-wide when Redis answers ("shared": true), else
// this node's.
func (s *Server) handleTeamUsage(c *gin.Context) {
	name := c.Param("name")
	t := s.Catalog.Load().Team(name)
	if t == nil {
		writeError(c, errNoTeam(name))
		return
	}
	u, err := s.Edge.Usage(c.Request.Context(), t)
	if err != nil {
		writeError(c, &apiError{Status: http.StatusServiceUnavailable, Type: "unavailable", Message: "usage unavailable: " + err.Error()})
		return
	}
	var resets *time.Time
	if !u.ResetsAt.IsZero() {
		r := u.ResetsAt.UTC()
		resets = &r
	}
	c.JSON(http.StatusOK, gin.H{
		"team": t.Name, "node": s.Config.Server.NodeID, "shared": u.Shared,
		"rpm":      gin.H{"limit": t.RPM, "used": u.RPMUsed},
		"tpm":      gin.H{"limit": t.TPM, "used": u.TPMUsed},
		"parallel": gin.H{"limit": t.MaxParallel, "in_flight": u.InFlight},
		"budget": gin.H{"usd": t.Budget.USD, "spent": u.SpentUSD, "period": t.Budget.Period.String(),
			"resets_at": resets, "alerted": u.Alerted},
	})
}

// handleRequests is GET /admin/requests?team=&model=&status=&limit=: recent
// audit entries, newest first (default 50, at most 500).
func (s *Server) handleRequests(c *gin.Context) {
	f := telemetry.Filter{Team: c.Query("team"), Model: c.Query("model"), Limit: requestsDefault}
	if v := c.Query("status"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 || n > 599 {
			writeError(c, errBadRequest("status", "status: \""+v+"\" is not an HTTP status (100..599)"))
			return
		}
		f.Status = n
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(c, errBadRequest("limit", "limit: \""+v+"\" is not a positive number (default 50, at most 500)"))
			return
		}
		f.Limit = min(n, requestsMax)
	}
	es, err := s.Audit.Recent(c.Request.Context(), f)
	if err != nil {
		writeError(c, &apiError{Status: http.StatusServiceUnavailable, Type: "unavailable", Message: "audit store unavailable: " + err.Error()})
		return
	}
	if es == nil {
		es = []*telemetry.Entry{}
	}
	c.JSON(http.StatusOK, gin.H{"requests": es, "count": len(es), "limit": f.Limit})
}
