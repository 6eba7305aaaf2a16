package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knadh/koanf/parsers/yaml"

	"switchyard/config"
)

// k8sDocs returns the documents of a multi-document manifest.
func k8sDocs(t *testing.T, name string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("k8s", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, part := range strings.Split(string(raw), "\n---\n") {
		doc, err := yaml.Parser().Unmarshal([]byte(part))
		if err != nil {
			t.Fatalf("k8s/%s: %v", name, err)
		}
		if len(doc) > 0 {
			out = append(out, doc)
		}
	}
	return out
}

func field(m any, path ...string) any {
	for _, k := range path {
		mm, _ := m.(map[string]any)
		m = mm[k]
	}
	return m
}

// serviceLinks is what Kubernetes puts in the environment of every
// container of the namespace for a Service unless the pod sets
// enableServiceLinks: false (the Docker-links variables).
func serviceLinks(svc map[string]any) []string {
	name := strings.ToUpper(strings.ReplaceAll(field(svc, "metadata", "name").(string), "-", "_"))
	env := []string{name + "_SERVICE_HOST=10.96.0.10"}
	ports, _ := field(svc, "spec", "ports").([]any)
	for i, p := range ports {
		port := fmt.Sprint(field(p, "port"))
		proto, _ := field(p, "protocol").(string)
		if proto == "" {
			proto = "TCP"
		}
		if i == 0 {
			env = append(env, name+"_SERVICE_PORT="+port, name+"_PORT="+strings.ToLower(proto)+"://10.96.0.10:"+port)
		}
		if pn, _ := field(p, "name").(string); pn != "" {
			env = append(env, name+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(pn, "-", "_"))+"="+port)
		}
		pre := name + "_PORT_" + port + "_" + proto
		env = append(env, pre+"=tcp://10.96.0.10:"+port, pre+"_PROTO="+strings.ToLower(proto), pre+"_PORT="+port, pre+"_ADDR=10.96.0.10")
	}
	return env
}

// TestKubernetesPodEnvironment loads the ConfigMap's switchyard.yaml with
// the environment the Deployment's container really gets: its env, the
// Secret's keys (envFrom) and, unless the pod turns them off, the service
// links Kubernetes adds for every Service of the namespace. The Service is
// named switchyard, so those are SWITCHYARD_SERVICE_HOST, SWITCHYARD_PORT,
// ...: environment overrides naming no section, which fail the config.
// It also checks that the container leaves the runtime's soft memory limit
// to server.memory_limit (auto: 90% of the cgroup limit): a GOMEMLIMIT of
// the whole limits.memory wins over it and leaves no headroom.
func TestKubernetesPodEnvironment(t *testing.T) {
	var dep map[string]any
	for _, d := range k8sDocs(t, "deployment.yaml") {
		if d["kind"] == "Deployment" {
			dep = d
		}
	}
	if dep == nil {
		t.Fatal("k8s/deployment.yaml: no Deployment")
	}
	pod := field(dep, "spec", "template", "spec")
	containers, _ := field(pod, "containers").([]any)
	if len(containers) != 1 {
		t.Fatalf("want one container, got %d", len(containers))
	}
	c := containers[0]

	var env []string
	envs, _ := field(c, "env").([]any)
	for _, e := range envs {
		name, _ := field(e, "name").(string)
		if ref := field(e, "valueFrom", "resourceFieldRef", "resource"); name == "GOMEMLIMIT" && ref == "limits.memory" {
			t.Errorf("k8s/deployment.yaml: GOMEMLIMIT is the whole limits.memory; it overrides server.memory_limit (auto: 90%% of it) and leaves no headroom")
		}
		v := fmt.Sprint(field(e, "value"))
		if field(e, "valueFrom") != nil {
			v = "pod-" + strings.ToLower(name)
		}
		env = append(env, name+"="+v)
	}
	secret := k8sDocs(t, "secret.example.yaml")[0]
	from, _ := field(c, "envFrom").([]any)
	for _, f := range from {
		if field(f, "secretRef", "name") != field(secret, "metadata", "name") {
			t.Fatalf("envFrom %v: not the Secret of secret.example.yaml", f)
		}
		data, _ := field(secret, "stringData").(map[string]any)
		for k, v := range data {
			env = append(env, k+"="+fmt.Sprint(v))
		}
	}
	if links, set := field(pod, "enableServiceLinks").(bool); !set || links {
		for _, svc := range k8sDocs(t, "service.yaml") {
			env = append(env, serviceLinks(svc)...)
		}
	}

	raw := configMapFile(t, filepath.Join("k8s", "configmap.yaml"), "switchyard.yaml")
	if _, err := config.Load(raw, env); err != nil {
		t.Fatalf("the pod's switchyard.yaml does not load with the pod's environment %v:\n%v", env, err)
	}
}
