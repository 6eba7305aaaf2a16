package gateway

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"switchyard/routing"
)

// NodeHealth is one node's deployment health as it published it with its
// heartbeat (SPEC 11: GET /admin/health?node=all).
type NodeHealth struct {
	Node        string          `json:"node"`
	Seen        time.Time       `json:"seen"` // when the snapshot was taken (the heartbeat)
	Deployments json.RawMessage `json:"deployments"`
}

// HealthJSON is this node's health snapshot as published with the
// heartbeat.
func (s *Server) HealthJSON() json.RawMessage {
	b, _ := json.Marshal(s.healthNow())
	return b
}

func (s *Server) healthNow() []routing.DeploymentHealth {
	h := s.router().Health(time.Now())
	if h == nil {
		h = []routing.DeploymentHealth{}
	}
	slices.SortFunc(h, func(a, b routing.DeploymentHealth) int { return strings.Compare(a.ID, b.ID) })
	return h
}

// handleAdminHealth shows each deployment's live state on this node (SPEC
// 6); ?node=all answers for every live node from the snapshots they publish
// with their heartbeats (this node's own entry is live), ?node=<id> for one.
func (s *Server) handleAdminHealth(c *gin.Context) {
	self := s.Config.Server.NodeID
	want, ok := c.GetQuery("node")
	if !ok || want == self {
		c.JSON(http.StatusOK, gin.H{"node": self, "deployments": s.healthNow()})
		return
	}
	if want == "" {
		writeError(c, errBadRequest("node", "node: \"all\", or the id of a live node"))
		return
	}
	now := time.Now()
	mine := NodeHealth{Node: self, Seen: now, Deployments: s.HealthJSON()}
	nodes := []NodeHealth{mine}
	if s.ClusterHealth != nil {
		all, err := s.ClusterHealth(c.Request.Context())
		if err != nil {
			writeError(c, &apiError{Status: http.StatusServiceUnavailable, Type: "unavailable", Code: "cluster_unavailable",
				Message: "the node list is in Redis, which does not answer: ask without ?node for this node's health"})
			return
		}
		for _, n := range all {
			if n.Node != self {
				nodes = append(nodes, n)
			}
		}
	}
	slices.SortFunc(nodes, func(a, b NodeHealth) int { return strings.Compare(a.Node, b.Node) })
	if want == "all" {
		c.JSON(http.StatusOK, gin.H{"node": self, "nodes": nodes})
		return
	}
	for _, n := range nodes {
		if n.Node == want {
			c.JSON(http.StatusOK, gin.H{"node": n.Node, "seen": n.Seen, "deployments": n.Deployments})
			return
		}
	}
	writeError(c, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "node_not_found", Param: "node",
		Message: "node: no live node \"" + want + "\" (GET /admin/cluster lists them)"})
}
