// Package deploy holds the deployment files (Dockerfile, nginx, compose,
// Kubernetes, Grafana) and the configuration examples; its only Go code is
// this test, which keeps every example loadable with the current schema.
package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"switchyard/config"
)

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// dummyEnv sets every ${NAME} the file references to a distinct dummy value,
// as an operator's environment would.
func dummyEnv(raw []byte) []string {
	seen := map[string]bool{}
	var env []string
	for _, m := range envRef.FindAllStringSubmatch(string(raw), -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			env = append(env, m[1]+"=dummy-"+strings.ToLower(m[1]))
		}
	}
	return env
}

func configFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatal("no examples found under deploy/examples")
	}
	return append(files, filepath.Join("compose", "switchyard.yaml"))
}

func TestExamplesLoad(t *testing.T) {
	for _, path := range configFiles(t) {
		t.Run(filepath.ToSlash(path), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(raw, dummyEnv(raw))
			if err != nil {
				t.Fatalf("%s does not validate:\n%v", path, err)
			}
			if len(cfg.Providers) == 0 || len(cfg.Deployments) == 0 || len(cfg.Teams) == 0 {
				t.Errorf("%s: want at least one provider, deployment and team", path)
			}
		})
	}
}

// TestExamplesKeepSecretsInEnv checks that no example writes a team key, an
// upstream credential or the admin key in clear: each is a ${ENV} reference
// (or, for team keys, a sha256: digest).
func TestExamplesKeepSecretsInEnv(t *testing.T) {
	for _, path := range configFiles(t) {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(raw, dummyEnv(raw))
		if err != nil {
			continue // reported by TestExamplesLoad
		}
		fromEnv := func(v string) bool { return strings.HasPrefix(v, "dummy-") }
		for _, tm := range cfg.Teams {
			for _, k := range tm.Keys {
				if !fromEnv(k) && !strings.HasPrefix(k, "sha256:") {
					t.Errorf("%s: team %q has a key in clear; write it as ${ENV} or sha256:<hex>", path, tm.Name)
				}
			}
		}
		for _, p := range cfg.Providers {
			if p.APIKey != "" && !fromEnv(p.APIKey) {
				t.Errorf("%s: provider %q has its api_key in clear; write it as ${ENV}", path, p.Name)
			}
		}
		if cfg.Admin.Key != "" && !fromEnv(cfg.Admin.Key) {
			t.Errorf("%s: admin.key in clear; write it as ${SWITCHYARD_ADMIN_KEY}", path)
		}
	}
}
