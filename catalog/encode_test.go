package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"switchyard/config"
)

// encodeState writes exactly what json.Marshal does (other replicas, and
// older versions, decode it), for states with and without teams and keys,
// key objects with limits, budgets, end users and names that look like
// the JSON it splices.
func TestEncodeStateIsMarshal(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`
providers: [{name: sim, kind: simulated}]
deployments: [{id: a, model: m, provider: sim}, {id: b, model: n, provider: sim}]
routing: {fallbacks: [{primary: m, reason: general, models: [n]}]}
teams:
  - {name: "x\"keys\":null", keys: ["k0"], models: ["*"], rpm: 5, budget: {usd: 2, period: weekly}}
  - {name: none, keys: ["k-none"], models: [m]}
  - name: lv
    models: [m, n]
    user_limits: {rpm: 7, budget: {usd: 1, period: daily, alert_at: 0.5}}
    keys:
`)
	for i := range 50 {
		fmt.Fprintf(&sb, "      - {key: \"sk-k%d\", name: \"k%d\\\"keys\\\":null\", rpm: %d, models: [m], expires_at: \"2030-01-02T03:04:05Z\", budget: {usd: 3}}\n", i, i, i+1)
	}
	cfg, err := config.Load([]byte(sb.String()), nil)
	if err != nil {
		t.Fatal(err)
	}
	seeded := SeedState(cfg)
	seeded.Teams[2].Users = map[string]UserSpec{"u1": {}}
	states := map[string]*State{
		"seeded":   seeded,
		"empty":    {},
		"no teams": {Version: 3, Teams: []TeamSpec{}},
		"no keys":  {Teams: []TeamSpec{{Name: "a", Keys: []Key{}}, {Name: "b"}}},
		"one key":  {Teams: []TeamSpec{{Name: "a", Keys: []Key{{ID: "k", Name: "n"}}}}},
	}
	for name, s := range states {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, hint := range []int{0, 1 << 20} {
			got, err := encodeState(s, hint)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s (hint %d): %v\n got %s\nwant %s", name, hint, err, got, want)
			}
		}
	}
}

// BenchmarkEncodeState is a state of 100,000 keys stored: B/op is what
// one save allocates (json.Marshal: about 2.5 times the encoded size).
func BenchmarkEncodeState(b *testing.B) {
	s := &State{Teams: []TeamSpec{{Name: "lv", Models: []string{"*"}}}}
	for i := range 100_000 {
		s.Teams[0].Keys = append(s.Teams[0].Keys, Key{ID: fmt.Sprintf("cfg_%016x", i), Name: fmt.Sprintf("k%d", i), Source: SourceConfig})
	}
	for _, v := range []struct {
		name string
		enc  func() ([]byte, error)
	}{
		{"json.Marshal", func() ([]byte, error) { return json.Marshal(s) }},
		{"encodeState", func() ([]byte, error) { return encodeState(s, 0) }},
	} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.enc(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
