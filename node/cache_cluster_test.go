package node

import (
	"context"
	"testing"
	"time"
)

// SPEC 18 across replicas: an answer one node stored (through its writer)
// is a hit on another, read in that node's Begin round trip; a limited team
// and an unlimited one alike; a tier alias reads the entry of the tier it
// resolved to.
func TestCacheSharedAcrossReplicas(t *testing.T) {
	_, nodes, srvs := startCluster(t, 2, "500ms", "redis: {", "cache: {enabled: true}\nredis: {")
	for _, key := range []string{"sk-rpm", "sk-open"} {
		body := `{"model":"m","messages":[{"role":"user","content":"shared ` + key + `"}]}`
		resp, _ := post(t, srvs[0].URL+"/v1/chat/completions", key, body)
		if resp == nil || resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Cache") != "miss" {
			t.Fatalf("%s first on node 1: %v", key, resp)
		}
		// node 1's writer sends the entry; then node 2 answers from it
		deadline := time.Now().Add(5 * time.Second)
		for {
			resp, b := post(t, srvs[1].URL+"/v1/chat/completions", key, body, "Cache-Control", "only-if-cached")
			if resp != nil && resp.StatusCode == 200 && resp.Header.Get("X-Switchyard-Cache") == "hit" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: node 2 never found node 1's entry: %v %s", key, resp, b)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = n.Close(ctx)
		cancel()
	}
}
