package node

import (
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"testing"
	"time"
)

// waitVersion waits, at most a second (SPEC 11: live on every replica
// within one second), until every node's snapshot has reached version v:
// the point from which each node must answer with the change. It watches
// node state, not request outcomes, so no retry hides a wrong answer.
func waitVersion(t *testing.T, nodes []*Node, v int64) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for _, n := range nodes {
		for n.Catalog.Load().Version < v {
			if time.Now().After(deadline) {
				t.Fatalf("%s is at catalog version %d a second after version %d was published", n.Config.Server.NodeID, n.Catalog.Load().Version, v)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

func versionIn(t *testing.T, body string) int64 {
	t.Helper()
	var v struct{ Version int64 }
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.Version == 0 {
		t.Fatalf("answer carries no version: %s", body)
	}
	return v.Version
}

// onePerNode sends exactly one chat request through each replica.
func onePerNode(t *testing.T, srvs []*httptest.Server, key string) []int {
	t.Helper()
	var out []int
	for _, s := range srvs {
		resp, _ := post(t, s.URL+"/v1/chat/completions", key, chatBody)
		if resp == nil {
			t.FailNow()
		}
		out = append(out, resp.StatusCode)
	}
	return out
}

func TestClusterKeyIssueAndRevoke(t *testing.T) {
	_, nodes, srvs := startCluster(t, 3, "2s")
	status, body := adminReq(t, "POST", srvs[0].URL+"/admin/teams/open/keys", `{"name":"rotating"}`)
	if status != 201 {
		t.Fatalf("%d %s", status, body)
	}
	var k issuedKey
	_ = json.Unmarshal([]byte(body), &k)
	// the issue answer has no version field of its own; the catalog of node
	// 1 holds the saved one
	waitVersion(t, nodes, nodes[0].Catalog.Load().Version)
	if got := onePerNode(t, srvs, k.Key); got[0] != 200 || got[1] != 200 || got[2] != 200 {
		t.Fatalf("a key issued through node 1 must work on every node within a second: %v", got)
	}
	status, body = adminReq(t, "DELETE", srvs[1].URL+"/admin/teams/open/keys/"+k.ID, "")
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	waitVersion(t, nodes, versionIn(t, body))
	if got := onePerNode(t, srvs, k.Key); got[0] != 401 || got[1] != 401 || got[2] != 401 {
		t.Fatalf("a revoked key must be 401 on every node within a second: %v", got)
	}
	// a deleted team's config key stops everywhere too
	status, body = adminReq(t, "DELETE", srvs[2].URL+"/admin/teams/open", "")
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	waitVersion(t, nodes, versionIn(t, body))
	if got := onePerNode(t, srvs, "sk-open"); got[0] != 401 || got[1] != 401 || got[2] != 401 {
		t.Fatalf("a deleted team's key must be 401 on every node within a second: %v", got)
	}
}

func TestClusterTeamLimitChangeEnforcedByAll(t *testing.T) {
	_, nodes, srvs := startCluster(t, 3, "2s")
	status, body := adminReq(t, "PUT", srvs[0].URL+"/admin/teams/fresh", `{"models":["*"],"rpm":12}`)
	if status != 201 {
		t.Fatalf("%d %s", status, body)
	}
	status, body = adminReq(t, "POST", srvs[1].URL+"/admin/teams/fresh/keys", `{"name":"load"}`)
	if status != 201 {
		t.Fatalf("%d %s", status, body)
	}
	var k issuedKey
	_ = json.Unmarshal([]byte(body), &k)
	waitVersion(t, nodes, nodes[1].Catalog.Load().Version)
	start := time.Now()
	counts := burst(t, srvs, k.Key, chatBody, 60)
	refill := int(time.Since(start) / (5 * time.Second)) // rpm 12: one back every 5s
	if counts[200] < 12 || counts[200] > 12+refill || counts[200]+counts[429] != 60 {
		t.Fatalf("rpm 12 set through node 1 over 3 replicas: want 12 admitted, got %v", counts)
	}
	for _, n := range nodes {
		if f := fallbackCount(t, n, "ratelimit"); f != 0 {
			t.Fatalf("%s fell back to the local limiter: not a test of the shared one", n.Config.Server.NodeID)
		}
	}
}

// issuedKey is the part of the key-issue answer these tests read.
type issuedKey struct {
	ID   string `json:"id"`
	Team string `json:"team"`
	Key  string `json:"key"`
}

type usageAnswer struct {
	Shared   bool
	RPM      struct{ Limit, Used int64 }
	TPM      struct{ Limit, Used int64 }
	Parallel struct {
		InFlight int64 `json:"in_flight"`
	}
	Budget struct{ Spent float64 }
}

// TestClusterUsageAnsweredByAnyNode: traffic sent through all three
// replicas, then the usage read through each one: every replica answers
// the cluster's numbers (rpm and tpm charged, slots released, spend), once
// the writers' reconcile has reached Redis.
func TestClusterUsageAnsweredByAnyNode(t *testing.T) {
	rs, nodes, srvs := startCluster(t, 3, "2s")
	status, body := adminReq(t, "PUT", srvs[0].URL+"/admin/teams/metered", `{"models":["*"],"rpm":60,"tpm":60000,"max_parallel":10,"budget":{"usd":100,"period":"720h"}}`)
	if status != 201 {
		t.Fatalf("%d %s", status, body)
	}
	status, body = adminReq(t, "POST", srvs[0].URL+"/admin/teams/metered/keys", `{"name":"u"}`)
	var k issuedKey
	_ = json.Unmarshal([]byte(body), &k)
	waitVersion(t, nodes, nodes[0].Catalog.Load().Version)

	start := time.Now()
	const perNode = 4
	var tokens int64
	var spend float64
	for i := 0; i < perNode; i++ {
		for _, s := range srvs {
			resp, b := post(t, s.URL+"/v1/chat/completions", k.Key, chatBody)
			if resp == nil || resp.StatusCode != 200 {
				t.Fatalf("%v %s", resp, b)
			}
			var u struct {
				Usage struct {
					P int64 `json:"prompt_tokens"`
					C int64 `json:"completion_tokens"`
				} `json:"usage"`
			}
			_ = json.Unmarshal([]byte(b), &u)
			tokens += u.Usage.P + u.Usage.C
			spend += (float64(u.Usage.P)*1 + float64(u.Usage.C)*2) / 1e6 // d1 and d2 cost the same
		}
	}
	// the writers reconcile asynchronously: wait (bounded) until the spend
	// and the slot releases are in Redis, then ask each replica once
	c := rs.Client()
	waitUntilTrue(t, "reconcile in Redis", func() bool {
		usd, _ := c.HGet(context.Background(), "sytest:{team:metered}:budget", "usd").Float64()
		n, _ := c.ZCard(context.Background(), "sytest:{team:metered}:par").Result()
		return math.Abs(usd-spend) < 1e-9 && n == 0
	})
	total := int64(perNode * len(srvs))
	for _, s := range srvs {
		status, body := adminReq(t, "GET", s.URL+"/admin/teams/metered/usage", "")
		var u usageAnswer
		if err := json.Unmarshal([]byte(body), &u); err != nil || status != 200 {
			t.Fatalf("%d %s", status, body)
		}
		// GCRA returns capacity continuously: rpm 60 gives one request back
		// per second, tpm 60000 a thousand tokens per second
		elapsed := time.Since(start).Seconds()
		if !u.Shared || u.RPM.Used > total || float64(u.RPM.Used) < float64(total)-math.Ceil(elapsed) {
			t.Fatalf("%s: rpm used %d, want %d (less at most %.1fs of refill): %s", s.URL, u.RPM.Used, total, elapsed, body)
		}
		if u.TPM.Used > tokens || float64(u.TPM.Used) < float64(tokens)-math.Ceil(elapsed*1000) {
			t.Fatalf("%s: tpm used %d, want the %d tokens reconciled: %s", s.URL, u.TPM.Used, tokens, body)
		}
		if u.Parallel.InFlight != 0 || math.Abs(u.Budget.Spent-spend) > 1e-9 {
			t.Fatalf("%s: in flight %d spent %g, want 0 and %g: %s", s.URL, u.Parallel.InFlight, u.Budget.Spent, spend, body)
		}
	}
}
