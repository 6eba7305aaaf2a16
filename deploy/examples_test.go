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

	"github.com/knadh/koanf/parsers/yaml"

	"switchyard/config"
)

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// dummyEnv sets every ${NAME} the file references to a distinct dummy value,
// as an operator's environment would (a *REDIS_URL gets a Redis URL).
func dummyEnv(raw []byte) []string {
	seen := map[string]bool{}
	var env []string
	for _, m := range envRef.FindAllStringSubmatch(string(raw), -1) {
		name := m[1]
		if seen[name] {
			continue
		}
		seen[name] = true
		value := "dummy-" + strings.ToLower(name)
		if strings.HasSuffix(name, "REDIS_URL") {
			value = "redis://dummy-redis:6379/0"
		}
		env = append(env, name+"="+value)
	}
	return env
}

type configFile struct {
	name string
	raw  []byte
}

// configFiles is every switchyard.yaml shipped under deploy/: the examples,
// the docker-compose configuration and the one inside the Kubernetes
// ConfigMap.
func configFiles(t *testing.T) []configFile {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatal("no examples found under deploy/examples")
	}
	files = append(files, filepath.Join("compose", "switchyard.yaml"))
	var out []configFile
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, configFile{filepath.ToSlash(f), raw})
	}
	return append(out, configFile{"k8s/configmap.yaml#switchyard.yaml", configMapFile(t, filepath.Join("k8s", "configmap.yaml"), "switchyard.yaml")})
}

// configMapFile returns data[key] of a one-document ConfigMap manifest.
func configMapFile(t *testing.T, path, key string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := yaml.Parser().Unmarshal(raw)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	data, _ := doc["data"].(map[string]any)
	s, ok := data[key].(string)
	if doc["kind"] != "ConfigMap" || !ok {
		t.Fatalf("%s: want a ConfigMap with data.%s", path, key)
	}
	return []byte(s)
}

func TestExamplesLoad(t *testing.T) {
	for _, f := range configFiles(t) {
		t.Run(f.name, func(t *testing.T) {
			path, raw := f.name, f.raw
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
	for _, f := range configFiles(t) {
		path, raw := f.name, f.raw
		cfg, err := config.Load(raw, dummyEnv(raw))
		if err != nil {
			continue // reported by TestExamplesLoad
		}
		fromEnv := func(v string) bool { return strings.HasPrefix(v, "dummy-") }
		for _, tm := range cfg.Teams {
			for _, ks := range tm.Keys {
				k := ks.Key
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

// TestComposeWiring checks that docker-compose.yml runs three gateway
// replicas on deploy/compose/switchyard.yaml, each with its own node id,
// behind the nginx of deploy/nginx.conf, whose upstream names exactly them.
func TestComposeWiring(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := yaml.Parser().Unmarshal(raw)
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	services, _ := doc["services"].(map[string]any)
	nodeIDs := map[string]bool{}
	var gateways []string
	for name, v := range services {
		svc, _ := v.(map[string]any)
		cmd, _ := svc["command"].([]any)
		if len(cmd) == 0 || cmd[0] != "serve" {
			continue
		}
		gateways = append(gateways, name)
		mounted := false
		vols, _ := svc["volumes"].([]any)
		for _, vol := range vols {
			if s, _ := vol.(string); strings.HasPrefix(s, "./deploy/compose/switchyard.yaml:/etc/switchyard/switchyard.yaml") {
				mounted = true
			}
		}
		if !mounted {
			t.Errorf("docker-compose.yml: %s does not mount deploy/compose/switchyard.yaml", name)
		}
		env, _ := svc["environment"].(map[string]any)
		id, _ := env["SWITCHYARD_SERVER_NODE_ID"].(string)
		if id == "" || nodeIDs[id] {
			t.Errorf("docker-compose.yml: %s needs its own SWITCHYARD_SERVER_NODE_ID, got %q", name, id)
		}
		nodeIDs[id] = true
	}
	sort.Strings(gateways)
	if len(gateways) != 3 {
		t.Fatalf("docker-compose.yml: want three gateway replicas, got %v", gateways)
	}
	nginx, err := os.ReadFile("nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	upstreams := regexp.MustCompile(`(?m)^\s*server\s+([a-z0-9-]+):8080\b`).FindAllStringSubmatch(string(nginx), -1)
	var names []string
	for _, m := range upstreams {
		names = append(names, m[1])
	}
	sort.Strings(names)
	if strings.Join(names, ",") != strings.Join(gateways, ",") {
		t.Errorf("deploy/nginx.conf upstream servers %v, want the compose gateways %v", names, gateways)
	}
}

// TestComposeTracingProfile checks the tracing example of docker-compose.yml:
// the OpenTelemetry Collector runs only under the `tracing` profile with
// deploy/compose/otel-collector.yaml, whose OTLP/HTTP receiver listens on
// 4318 and feeds a traces pipeline, and every gateway takes its endpoint
// from SWITCHYARD_TRACING_OTLP_ENDPOINT, empty (tracing off) by default.
func TestComposeTracingProfile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := yaml.Parser().Unmarshal(raw)
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	services, _ := doc["services"].(map[string]any)
	col, _ := services["otel-collector"].(map[string]any)
	if col == nil {
		t.Fatal("docker-compose.yml: no otel-collector service")
	}
	for _, name := range []string{"otel-collector", "jaeger"} {
		svc, _ := services[name].(map[string]any)
		profiles, _ := svc["profiles"].([]any)
		if len(profiles) != 1 || profiles[0] != "tracing" {
			t.Errorf("docker-compose.yml: %s must run only under the tracing profile, has profiles %v", name, profiles)
		}
	}
	vols, _ := col["volumes"].([]any)
	if len(vols) != 1 || !strings.HasPrefix(vols[0].(string), "./deploy/compose/otel-collector.yaml:") {
		t.Errorf("otel-collector volumes %v, want deploy/compose/otel-collector.yaml", vols)
	}
	gateways := 0
	for name, v := range services {
		svc, _ := v.(map[string]any)
		if cmd, _ := svc["command"].([]any); len(cmd) == 0 || cmd[0] != "serve" {
			continue
		}
		gateways++
		env, _ := svc["environment"].(map[string]any)
		if got := env["SWITCHYARD_TRACING_OTLP_ENDPOINT"]; got != "${SWITCHYARD_TRACING_OTLP_ENDPOINT:-}" {
			t.Errorf("docker-compose.yml: %s SWITCHYARD_TRACING_OTLP_ENDPOINT = %v, want it from the environment, empty by default", name, got)
		}
	}
	if gateways == 0 {
		t.Fatal("no gateway services")
	}

	craw, err := os.ReadFile(filepath.Join("compose", "otel-collector.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := yaml.Parser().Unmarshal(craw)
	if err != nil {
		t.Fatalf("otel-collector.yaml: %v", err)
	}
	get := func(m any, path ...string) any {
		for _, k := range path {
			mm, _ := m.(map[string]any)
			m = mm[k]
		}
		return m
	}
	if ep := get(cfg, "receivers", "otlp", "protocols", "http", "endpoint"); ep != "0.0.0.0:4318" {
		t.Errorf("otel-collector.yaml: OTLP/HTTP receiver endpoint %v, want 0.0.0.0:4318", ep)
	}
	pipe, _ := get(cfg, "service", "pipelines", "traces").(map[string]any)
	recv, _ := pipe["receivers"].([]any)
	exps, _ := pipe["exporters"].([]any)
	if len(recv) != 1 || recv[0] != "otlp" || len(exps) == 0 {
		t.Fatalf("otel-collector.yaml: traces pipeline %v", pipe)
	}
	for _, e := range exps {
		if get(cfg, "exporters", e.(string)) == nil && e != "debug" {
			t.Errorf("otel-collector.yaml: pipeline exporter %v is not defined", e)
		}
	}
}
