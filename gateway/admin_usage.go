package gateway

import (
	"cmp"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/edge"
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
		writeError(c, errUsageUnavailable(err))
		return
	}
	h := usageAgainst(t.Team.Level(), u)
	h["team"], h["node"] = t.Name, s.Config.Server.NodeID
	c.JSON(http.StatusOK, h)
}

// handleKeyUsage is GET /admin/teams/{name}/keys/{id}/usage: one key's
// live usage against its own limits (SPEC 3.1; the key by id or name),
// cluster-wide when Redis answers. A key without limits of its own answers
// zero limits and no usage: its requests meet the team's level alone.
func (s *Server) handleKeyUsage(c *gin.Context) {
	name, id := c.Param("name"), c.Param("id")
	snap := s.Catalog.Load()
	t := snap.Team(name)
	spec, ok := findTeam(snap.State, name)
	if t == nil || !ok {
		writeError(c, errNoTeam(name))
		return
	}
	// by id, else by name; a name several keys of the team share (a key
	// rotated under its name) names none of them
	var key *catalog.Key
	var named []string
	for i := range spec.Keys {
		k := &spec.Keys[i]
		if k.ID == id {
			key, named = k, nil
			break
		}
		if k.Name != "" && k.Name == id {
			named = append(named, k.ID)
			key = cmp.Or(key, k)
		}
	}
	if len(named) > 1 {
		writeError(c, errBadRequest("id", "team \""+name+"\" has "+strconv.Itoa(len(named))+" keys named \""+id+"\" ("+
			strings.Join(named, ", ")+"): send the key's id"))
		return
	}
	if key == nil {
		writeError(c, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "key_not_found", Param: "id",
			Message: "team \"" + name + "\" has no key with id or name \"" + id + "\" (GET /admin/teams/" + name + "/keys lists them)"})
		return
	}
	l := key.LimitsSpec.Level()
	lv := edge.Level{Kind: edge.LevelKey, ID: key.ID, Name: key.Name}
	if l.Any() {
		lv.Limits = &l
	}
	h, ok := s.levelUsage(c, t, lv, l)
	if !ok {
		return
	}
	h["key"], h["key_name"] = key.ID, key.Name
	c.JSON(http.StatusOK, h)
}

// levelUsage is the answer of a key's or an end user's usage (lv, whose
// effective limits are l) without its level's own fields, or false when it
// wrote the 503 of a usage read that failed.
func (s *Server) levelUsage(c *gin.Context, t *catalog.Team, lv edge.Level, l config.Limits) (gin.H, bool) {
	u, err := s.Edge.LevelUsage(c.Request.Context(), t, lv)
	if err != nil {
		writeError(c, errUsageUnavailable(err))
		return nil, false
	}
	h := usageAgainst(l, u)
	if l.Budget.USD <= 0 {
		h["budget"].(gin.H)["period"] = "" // no budget: no period
	}
	h["team"], h["node"] = t.Name, s.Config.Server.NodeID
	return h, true
}

// errUsageUnavailable is the 503 of a usage read that found neither Redis
// nor a local answer.
func errUsageUnavailable(err error) *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Type: "unavailable", Message: "usage unavailable: " + err.Error()}
}

// usageAgainst is a level's live usage against its limits, as the admin
// API answers it for a team and for an end user.
func usageAgainst(l config.Limits, u edge.TeamUsage) gin.H {
	var resets *time.Time
	if !u.ResetsAt.IsZero() {
		r := u.ResetsAt.UTC()
		resets = &r
	}
	return gin.H{
		"shared":   u.Shared,
		"rpm":      gin.H{"limit": l.RPM, "used": u.RPMUsed},
		"tpm":      gin.H{"limit": l.TPM, "used": u.TPMUsed},
		"parallel": gin.H{"limit": l.MaxParallel, "in_flight": u.InFlight},
		"budget": gin.H{"usd": l.Budget.USD, "spent": u.SpentUSD, "period": l.Budget.Period.String(), "alert_at": l.Budget.AlertAt,
			"resets_at": resets, "alerted": u.Alerted},
	}
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
