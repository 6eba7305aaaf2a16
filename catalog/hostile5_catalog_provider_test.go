package catalog

import (
	"testing"

	"switchyard/config"
)

// TestHostile5BuildDeploymentOfUnknownProvider: a stored deployment whose
// provider the node's file does not configure (removed before a restart,
// or created on a replica with a newer file) stays in the pool but is off:
// it cannot be served here, and selecting it dereferenced a nil Provider
// (a 500 on every request routed to it).
func TestHostile5BuildDeploymentOfUnknownProvider(t *testing.T) {
	cfg := testConfig(t)
	st := SeedState(cfg)
	st.Deployments = append(st.Deployments, config.Deployment{ID: "z", Model: "m", Provider: "gone", Operations: []string{"chat"}, Weight: 1})
	s := Build(cfg, st)
	d := s.Deployments["z"]
	if d == nil {
		t.Fatal("the stored deployment left the snapshot")
	}
	if d.On {
		t.Fatal("a deployment whose provider is not configured is selectable")
	}
	if !s.Deployments["b"].On {
		t.Fatal("a deployment of a configured provider is off")
	}
}
