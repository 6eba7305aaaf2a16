package gateway

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// handleAdminRequest returns the audit entry of a request id (SPEC 12.2);
// a reused id names several entries, possibly of several teams, and all of
// them are answered, newest first, under "entries" (SPEC 15).
func (s *Server) handleAdminRequest(c *gin.Context) {
	id := c.Param("id")
	es, err := s.Audit.Lookup(c.Request.Context(), id)
	if err != nil {
		writeError(c, &apiError{Status: http.StatusServiceUnavailable, Type: "unavailable", Message: "audit store unavailable: " + err.Error()})
		return
	}
	if len(es) == 0 {
		writeError(c, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "request_not_found",
			Message: "no audit entry for request id \"" + id + "\" (entries are kept for the last audit.max_entries requests)"})
		return
	}
	if len(es) == 1 {
		c.JSON(http.StatusOK, es[0])
		return
	}
	c.JSON(http.StatusOK, gin.H{"request_id": id, "entries": es})
}

// handleAdminCluster lists the nodes seen recently and the Redis state.
func (s *Server) handleAdminCluster(c *gin.Context) {
	out := gin.H{"node": s.Config.Server.NodeID, "redis": s.RedisState(), "catalog_version": s.Catalog.Load().Version}
	if s.Cluster != nil {
		nodes, err := s.Cluster(c.Request.Context())
		if err != nil {
			out["error"] = err.Error()
		}
		out["nodes"] = nodes
	} else {
		out["nodes"] = []gin.H{{"node": s.Config.Server.NodeID, "version": s.Version, "catalog_version": s.Catalog.Load().Version, "redis": s.RedisState()}}
	}
	c.JSON(http.StatusOK, out)
}
