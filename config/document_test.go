package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// yamlToJSON is the YAML document doc written as JSON, the way an operator
// who generates a large config would write it.
func yamlToJSON(t testing.TB, doc []byte) []byte {
	t.Helper()
	var tree map[string]any
	if err := yaml.Unmarshal(doc, &tree); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A config file that is a JSON document is read by the JSON parser (at a
// fraction of the YAML parser's memory) into the very Config the same
// document in YAML gives; a YAML flow mapping that starts like JSON but
// is not JSON is still read as YAML.
func TestJSONDocumentMatchesYAML(t *testing.T) {
	keys := minimal + `  - name: lv
    models: [m]
    rpm: 100000000
    tpm: 100000000000
    budget: {usd: 12.5, period: weekly, alert_at: 0.8}
    user_limits: {rpm: 7, budget: {usd: 1, period: daily}}
    keys:
      - {key: "sk-k1", name: k1, rpm: 5, models: [m], expires_at: "2030-01-02T03:04:05Z"}
      - "sk-k2"
`
	for name, doc := range map[string][]byte{"demo": demoYAML, "keys": []byte(keys)} {
		t.Run(name, func(t *testing.T) {
			want, err := Load(doc, []string{"DEMO_SECRET=x"})
			if err != nil {
				t.Fatal(err)
			}
			js := yamlToJSON(t, doc)
			if js[0] != '{' {
				t.Fatalf("not a JSON object: %.40s", js)
			}
			got, err := Load(append([]byte("\n  "), js...), []string{"DEMO_SECRET=x"})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("the JSON document decoded differently:\n json %+v\n yaml %+v", got, want)
			}
		})
	}
	// YAML flow style: starts with '{' but is not JSON
	c, err := Load([]byte(`{providers: [{name: sim, kind: simulated}], deployments: [{id: a, model: m, provider: sim}], teams: [{name: t, keys: [k1], models: ["*"]}]}`), nil)
	if err != nil || len(c.Teams) != 1 {
		t.Fatalf("a YAML flow mapping: %v", err)
	}
	// problems are reported alike: an unknown key in a JSON document
	_, err = Load(yamlToJSON(t, []byte(minimal+"routing: {cooldwn_base: 1s}\n")), nil)
	var p Problems
	if !errors.As(err, &p) || !strings.Contains(err.Error(), "routing.cooldwn_base: unknown key") {
		t.Fatalf("unknown key in JSON: %v", err)
	}
}

// A JSON document names a repeated member as the YAML parser would refuse
// it, with its path; and it is read by the JSON parser, which allocates a
// fraction of what the YAML parser does for the same document (so a large
// generated file starts a node within SPEC 16's memory).
func TestJSONDocumentParser(t *testing.T) {
	_, err := Load([]byte(`{"teams": [{"name": "t", "keys": ["a"]}, {"name": "u", "rpm": 1, "keys": ["b"], "rpm": 2}]}`), nil)
	if err == nil || !strings.Contains(err.Error(), `teams[1]: the key "rpm" appears twice`) {
		t.Fatalf("a repeated member: %v", err)
	}
	var sb strings.Builder
	sb.WriteString(minimal + "  - name: lv\n    models: [m]\n    keys:\n")
	for i := range 5000 {
		fmt.Fprintf(&sb, "      - {key: \"sk-k%d\", name: k%d, rpm: 100}\n", i, i)
	}
	doc := []byte(sb.String())
	js := yamlToJSON(t, doc)
	alloc := func(d []byte) uint64 {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		if _, err := parseDocument(d); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&b)
		return b.TotalAlloc - a.TotalAlloc
	}
	y, j := alloc(doc), alloc(js)
	t.Logf("parsing allocated %d bytes for the YAML document, %d for the JSON one", y, j)
	if j*10 > y*7 {
		t.Fatalf("the JSON document allocated %d bytes, the YAML one %d: not read by the JSON parser?", j, y)
	}
}

// Unknown keys at every depth are each named by their full path, sorted,
// whatever the decoder's order.
func TestUnknownKeysNamed(t *testing.T) {
	_, err := Load([]byte(minimal+"bogus: 1\nzzz: 2\nrouting: {cooldwn_base: 1s}\n"), nil)
	var p Problems
	if !errors.As(err, &p) {
		t.Fatalf("%v", err)
	}
	var got []string
	for _, s := range p {
		if strings.Contains(s, "unknown key") {
			got = append(got, strings.SplitN(s, ":", 2)[0])
		}
	}
	if strings.Join(got, " ") != "bogus routing.cooldwn_base zzz" {
		t.Fatalf("unknown keys %q in %v", got, p)
	}
}

// FuzzLoad: any document, YAML, JSON or neither, gives a Config or
// Problems, never a panic or another error.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add(yamlToJSON(f, []byte(minimal)))
	f.Add([]byte(`{"teams": [{"name": "t", "keys": [{"key": "k", "rpm": 1e3}]}]}`))
	f.Add([]byte(`{providers: [{name: sim}]`))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > 1<<16 {
			return
		}
		_, err := Load(doc, nil)
		var p Problems
		if err != nil && !errors.As(err, &p) {
			t.Fatalf("not Problems: %T %v", err, err)
		}
	})
}

// BenchmarkLoadKeys loads a file of one team with 100,000 key objects
// (bench/overhead.sh -l's), as YAML and as JSON: B/op is what a start or a
// reload allocates for it (the JSON parser's share is a fraction of the
// YAML one's, whose document tree is most of the start's peak).
func BenchmarkLoadKeys(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(minimal + "  - name: lv\n    models: [m]\n    keys:\n")
	for i := range 100_000 {
		fmt.Fprintf(&sb, "      - {key: \"sk-k%d\", name: k%d, rpm: 100000000, tpm: 100000000000}\n", i, i)
	}
	doc := []byte(sb.String())
	for name, d := range map[string][]byte{"yaml": doc, "json": yamlToJSON(b, doc)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Load(d, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
