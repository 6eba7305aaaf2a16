package node

import (
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"strings"
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

// TestClusterKeyPatchAndUserLimitsLiveEverywhere: a key's limits and models
// changed through one replica, and an end user's limits set through
// another, hold on every replica within a second (SPEC 3.1).
func TestClusterKeyPatchAndUserLimitsLiveEverywhere(t *testing.T) {
	_, nodes, srvs := startCluster(t, 3, "2s")
	status, body := adminReq(t, "POST", srvs[0].URL+"/admin/teams/open/keys", `{"name":"narrow","models":["m"],"rpm":1000}`)
	if status != 201 {
		t.Fatalf("%d %s", status, body)
	}
	var k issuedKey
	_ = json.Unmarshal([]byte(body), &k)
	waitVersion(t, nodes, nodes[0].Catalog.Load().Version)
	if got := onePerNode(t, srvs, k.Key); got[0] != 200 || got[1] != 200 || got[2] != 200 {
		t.Fatalf("the key may call m on every node: %v", got)
	}
	status, body = adminReq(t, "PATCH", srvs[1].URL+"/admin/teams/open/keys/"+k.ID, `{"models":["strong"],"rpm":7}`)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	waitVersion(t, nodes, versionIn(t, body))
	if got := onePerNode(t, srvs, k.Key); got[0] != 403 || got[1] != 403 || got[2] != 403 {
		t.Fatalf("a key narrowed away from m through node 2 must be 403 on every node within a second: %v", got)
	}
	for _, n := range nodes {
		if _, info := n.Catalog.Load().AuthenticateKey(k.Key, time.Now()); info == nil || info.Level() == nil || info.Level().RPM != 7 {
			t.Fatalf("%s: the key's rpm is not the patched one: %+v", n.Config.Server.NodeID, info)
		}
	}
	status, body = adminReq(t, "PUT", srvs[2].URL+"/admin/teams/open/users/alice", `{"rpm":3}`)
	if status != 201 {
		t.Fatalf("%d %s", status, body)
	}
	waitVersion(t, nodes, versionIn(t, body))
	for _, n := range nodes {
		if l := n.Catalog.Load().Team("open").UserLevel("alice"); l == nil || l.RPM != 3 {
			t.Fatalf("%s: alice's limits are not live: %+v", n.Config.Server.NodeID, l)
		}
	}
	status, body = adminReq(t, "GET", srvs[0].URL+"/admin/teams/open/users/alice", "")
	if status != 200 || !strings.Contains(body, `"override":true`) || !strings.Contains(body, `"rpm":{"limit":3`) {
		t.Fatalf("another node reads alice's limits: %d %s", status, body)
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

// TestClusterHealthAllNodes: GET /admin/health?node=all on any replica
// answers for every live node from the snapshots published with the
// heartbeats: a request served by node 2 shows in node 2's entry, read
// through node 1, and not in node 1's own.
func TestClusterHealthAllNodes(t *testing.T) {
	rs, _, srvs := startCluster(t, 3, "2s")
	resp, b := post(t, srvs[1].URL+"/v1/chat/completions", "sk-open", `{"model":"strong","messages":[{"role":"user","content":"hi"}]}`)
	if resp == nil || resp.StatusCode != 200 {
		t.Fatalf("%v %s", resp, b)
	}
	// node 2's next heartbeat carries the outcome: wait until it is in Redis
	c := rs.Client()
	waitUntilTrue(t, "node-2's heartbeat with the outcome", func() bool {
		v, _ := c.Get(context.Background(), "sytest:{nodes}:node:node-2").Result()
		return strings.Contains(v, `"ok":1`)
	})
	status, body := adminReq(t, "GET", srvs[0].URL+"/admin/health?node=all", "")
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var all struct {
		Nodes []struct {
			Node        string
			Seen        time.Time
			Deployments []struct {
				ID     string
				Recent map[string]int64 `json:"recent_outcomes"`
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Nodes) != 3 || all.Nodes[0].Node != "node-1" || all.Nodes[1].Node != "node-2" || all.Nodes[2].Node != "node-3" {
		t.Fatalf("want every live node: %s", body)
	}
	okOn := func(i int) int64 {
		for _, d := range all.Nodes[i].Deployments {
			if d.ID == "h1" {
				return d.Recent["ok"]
			}
		}
		t.Fatalf("node %d lists no h1: %s", i, body)
		return 0
	}
	if okOn(1) != 1 || okOn(0) != 0 || okOn(2) != 0 {
		t.Fatalf("scoring state is per node: h1 ok on node-1 %d, node-2 %d, node-3 %d", okOn(0), okOn(1), okOn(2))
	}
	if status, body := adminReq(t, "GET", srvs[2].URL+"/admin/health?node=node-2", ""); status != 200 || !strings.Contains(body, `"node":"node-2"`) || !strings.Contains(body, `"ok":1`) {
		t.Fatalf("one node by id: %d %s", status, body)
	}
	if status, _ := adminReq(t, "GET", srvs[0].URL+"/admin/health?node=ghost", ""); status != 404 {
		t.Fatalf("unknown node: %d", status)
	}
	if status, _ := adminReq(t, "GET", srvs[0].URL+"/admin/health?node=", ""); status != 400 {
		t.Fatalf("empty node: %d", status)
	}
	if _, body := adminReq(t, "GET", srvs[0].URL+"/admin/cluster", ""); strings.Contains(body, "recent_outcomes") {
		t.Fatal("the cluster listing must stay small: health is under /admin/health?node=all")
	}
}
