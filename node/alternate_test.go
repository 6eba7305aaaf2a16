package node

import (
	"testing"
)

// TestSequentialClientAlternatingReplicas: a strictly sequential client at
// max_parallel 1 whose load balancer sends each request to the other
// replica is never refused: the slot a request held is released in Redis
// before its answer reaches the client (SPEC 3: a release is visible to the
// very next admission).
func TestSequentialClientAlternatingReplicas(t *testing.T) {
	_, _, srvs := startCluster(t, 2, "2s", `{name: par5, keys: ["sk-par"], models: ["*"], max_parallel: 5}`, `{name: par5, keys: ["sk-par"], models: ["*"], max_parallel: 1}`)
	const n = 300
	refused := map[bool]int{}
	for j := range 2 * n {
		// every request goes to the other replica; sync and stream requests
		// alternate in pairs, so each kind follows each kind
		stream := j%4 >= 2
		body := chatBody
		if stream {
			body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`
		}
		resp, out := post(t, srvs[j%2].URL+"/v1/chat/completions", "sk-par", body)
		if resp == nil {
			t.Fatal("no answer")
		}
		if resp.StatusCode == 429 {
			refused[stream]++
		} else if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", j, resp.StatusCode, out)
		}
	}
	if refused[false]+refused[true] > 0 {
		t.Fatalf("sequential requests refused at max_parallel 1 across two replicas: %d of %d sync, %d of %d streams", refused[false], n, refused[true], n)
	}
}
