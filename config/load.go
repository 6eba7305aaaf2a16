package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/maps"
	"github.com/knadh/koanf/parsers/yaml"
)

// EnvPrefix starts every environment override: SWITCHYARD_<SECTION>_<KEY>.
const EnvPrefix = "SWITCHYARD_"

// Problems is every problem found in a configuration, reported together.
type Problems []string

func (p Problems) Error() string {
	return fmt.Sprintf("%d configuration problem(s):\n  - %s", len(p), strings.Join(p, "\n  - "))
}

// defaults are the scalar defaults of SPEC 13. Per-item defaults (a
// deployment's weight, a provider's simulate profile) are applied after
// unmarshalling in applyItemDefaults.
//
// (keySpecHook, below, reads a plain-string team key as a KeySpec.)
func defaults() map[string]any {
	return map[string]any{
		"server.listen":                    ":8080",
		"server.max_body_bytes":            10 << 20,
		"server.upstream_timeout":          "60s",
		"server.request_timeout":           "10m",
		"server.read_header_timeout":       "10s",
		"server.read_timeout":              "30s",
		"server.write_timeout":             "30s",
		"server.idle_timeout":              "120s",
		"server.metrics_listen":            "",
		"server.max_messages":              10000,
		"server.max_input_items":           2048,
		"server.max_inflight_body_bytes":   0, // derived from max_body_bytes in applyItemDefaults
		"server.memory_limit":              MemoryLimitAuto,
		"server.procs":                     ProcsAdaptive,
		"server.gc_percent":                DefaultGCPercent,
		"data_dir":                         "./data",
		"redis.timeout":                    "50ms",
		"redis.slot_lease":                 "30s",
		"redis.key_prefix":                 "switchyard:",
		"redis.expected_replicas":          1,
		"routing.default_strategy":         "simple_shuffle",
		"routing.latency_buffer":           0.10,
		"routing.retry_after":              "0s",
		"routing.cooldown_base":            "5s",
		"routing.cooldown_max":             "5m",
		"routing.failures_before_cooldown": 3,
		"routing.probe_interval":           "0s",
		"routing.last_resort":              true,
		"routing.min_weight_fraction":      0.05,
		"routing.ewma_decay":               "10s",
		"routing.warm_cache_ttl":           "5m",
		"routing.warm_cache_weight":        4,
		"routing.session_keeping":          true,
		"routing.default_max_tokens":       1024,
		"smart_routing.threshold":          4,
		"smart_routing.session_ttl":        "30m",
		"audit.max_entries":                10000,
		"tracing.sample_ratio":             1.0,
		"tracing.service_name":             "switchyard",
		"responses.store_ttl":              "24h",
		"responses.max_local":              10000,
		"responses.max_local_bytes":        256 << 20,
		"responses.max_team_bytes":         256 << 20,
		"cache.enabled":                    false,
		"cache.ttl":                        "1h",
		"cache.max_entry_bytes":            1 << 20,
		"cache.max_local_bytes":            64 << 20,
		"cache.coalesce":                   true,
		"cache.coalesce_wait":              "30s",
	}
}

// DefaultMaxAttempts is max_attempts[operation][mode] of SPEC 7.2.
func DefaultMaxAttempts() map[string]map[string]int {
	return map[string]map[string]int{
		"chat":       {"sync": 6, "stream": 4},
		"embeddings": {"sync": 6, "stream": 6},
		"images":     {"sync": 3, "stream": 3},
	}
}

// DefaultPoints is the smart-routing points table of SPEC 4.
func DefaultPoints() map[string]int {
	return map[string]int{
		"code": 3, "context_2k": 1, "context_8k": 2, "context_32k": 3,
		"tools": 1, "many_tools": 2, "tool_results": 1, "reasoning_words": 2,
		"math": 1, "deep_conversation": 1, "structured_output": 1, "long_output": 1,
	}
}

// LoadFile reads, merges and validates the configuration at path.
func LoadFile(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return Load(raw, os.Environ())
}

// Load builds a validated Config from a YAML (or JSON) document and an
// environment (as os.Environ returns it). Env overrides win over the file;
// ${NAME} placeholders are replaced from the same environment. Every
// problem, unknown keys included, is returned at once as Problems.
//
// The tree is merged in place (defaults, then the file, then the
// overrides, with koanf's maps helpers) and decoded once: a file with
// 100,000 keys is held as one parsed tree, not also as a Koanf instance's
// flattened copy and its deep copy (SPEC 16: node memory with 100,000
// keys, start included).
func Load(yamlBytes []byte, environ []string) (*Config, error) {
	env := envMap(environ)
	file, err := parseDocument(yamlBytes)
	if err != nil {
		return nil, Problems{fmt.Sprintf("config is not valid YAML: %v", err)}
	}
	var problems Problems
	overrides, envProblems := envOverrides(env)
	problems = append(problems, envProblems...)
	tree := maps.Unflatten(defaults(), ".")
	maps.Merge(file, tree)
	maps.Merge(maps.Unflatten(overrides, "."), tree)
	unset := unsetCredentials(tree, env)
	problems = append(problems, unset...)
	expandSecrets(tree, env)
	defaultSimulate(tree)

	var cfg Config
	dc := &mapstructure.DecoderConfig{
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			bareDurationHook, // a duration written as a number has no unit
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
			mapstructure.TextUnmarshallerHookFunc(), // budget periods (Period)
			keySpecHook,                             // a team key written as a plain string
			wholeNumberHook,                         // an integer is written whole, never empty
		),
		// unknown keys are decode errors (unknownKeys), not Metadata:
		// metadata would also record every decoded and every unset field
		// of every key, millions of paths for a large file
		ErrorUnused:      true,
		Result:           &cfg,
		WeaklyTypedInput: true,
		TagName:          "koanf",
	}
	dec, err := mapstructure.NewDecoder(dc)
	if err != nil {
		return nil, err
	}
	var unread Problems // the values the decoder could not read, one per field
	if err := dec.Decode(tree); err != nil {
		var unknown Problems
		for _, line := range strings.Split(err.Error(), "\n") {
			line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "*"))
			// mapstructure's header line names no field: v1's "N error(s)
			// decoding:", v2's "decoding failed due to the following error(s):"
			if keys, ok := unknownKeys(line); ok {
				unknown = append(unknown, keys...)
			} else if line != "" && !strings.HasSuffix(line, "decoding:") && !strings.HasPrefix(line, "decoding failed due to") {
				unread = append(unread, decodeProblem(line))
			}
		}
		sort.Strings(unknown)
		problems = append(problems, unread...)
		problems = append(problems, unknown...)
	}
	applyItemDefaults(&cfg)
	// a field the decoder could not read holds its zero value: Validate's
	// problem with that zero ("must be > 0, got 0") is not what the file
	// says, and the field is reported once, by its cause
	problems = append(problems, withoutFields(Validate(&cfg), append(unset, unread...))...)
	if len(problems) > 0 {
		return nil, problems
	}
	return &cfg, nil
}

// parseDocument parses the config file: a document that is a JSON object
// with a JSON parser (YAML 1.2 reads JSON the same way, at several times
// the memory: a generated file with 100,000 keys is best written as JSON),
// anything else, and JSON that does not parse, as YAML. A member repeated
// in a JSON object is an error, as YAML makes it. Numbers come out as YAML
// gives them (jsonNumber).
func parseDocument(b []byte) (map[string]any, error) {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		d := json.NewDecoder(bytes.NewReader(t))
		d.UseNumber() // integers stay exact, as YAML keeps them
		v, err := (&jsonReader{d: d}).value()
		if m, ok := v.(map[string]any); err == nil && ok && !d.More() {
			if _, err := d.Token(); err == io.EOF {
				return m, nil
			}
		}
		var dup *duplicateError
		if errors.As(err, &dup) {
			return nil, dup
		}
	}
	m, err := yaml.Parser().Unmarshal(b)
	if err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]any{}
	}
	maps.IntfaceKeysToStrings(m)
	return m, nil
}

// duplicateError is a JSON object that names one member twice.
type duplicateError struct{ path, key string }

func (e *duplicateError) Error() string {
	return fmt.Sprintf("%s: the key %q appears twice", cmp.Or(e.path, "the top level"), e.key)
}

// jsonReader reads a JSON document as the tree YAML would give (objects
// as map[string]any, arrays as []any, numbers as jsonNumber makes them). at is where
// it is, for an error: a member's key, or an element's index when key is
// "" (joined only when an error needs it).
type jsonReader struct {
	d  *json.Decoder
	at []jsonStep
}

type jsonStep struct {
	key string
	idx int
}

func (r *jsonReader) path() string {
	var b strings.Builder
	for _, s := range r.at {
		if s.key == "" {
			fmt.Fprintf(&b, "[%d]", s.idx)
		} else {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.key)
		}
	}
	return b.String()
}

// value reads one JSON value.
func (r *jsonReader) value() (any, error) {
	tok, err := r.d.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		m := map[string]any{}
		for r.d.More() {
			kt, err := r.d.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			if _, dup := m[k]; dup {
				return nil, &duplicateError{path: r.path(), key: k}
			}
			r.at = append(r.at, jsonStep{key: k})
			m[k], err = r.value()
			r.at = r.at[:len(r.at)-1]
			if err != nil {
				return nil, err
			}
		}
		_, err = r.d.Token() // '}'
		return m, err
	case json.Delim('['):
		l := []any{}
		for r.d.More() {
			r.at = append(r.at, jsonStep{idx: len(l)})
			v, err := r.value()
			r.at = r.at[:len(r.at)-1]
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		_, err = r.d.Token() // ']'
		return l, err
	}
	if n, ok := tok.(json.Number); ok {
		return jsonNumber(n), nil
	}
	return tok, nil
}

// jsonNumber is a JSON number as the YAML parser gives it: an int when it
// is a whole number that fits, else a float64 (±Inf beyond float range,
// which validation and wholeNumberHook refuse). The decoder's hooks must
// never meet a json.Number: it is of string kind, and the hooks that
// convert strings assert data.(string), so a duration or a team key
// written as a JSON number panicked in Load (switchyard check, serve, and
// a SIGHUP reload of the file).
func jsonNumber(n json.Number) any {
	if i, err := strconv.ParseInt(string(n), 10, 0); err == nil {
		return int(i)
	}
	f, _ := strconv.ParseFloat(string(n), 64) // the JSON grammar made it a number: only its range can fail
	return f
}

// decodeProblem rewrites one of mapstructure's error lines, "'<path>'
// <what>", in the form of every other problem, "<path>: <what>", saying
// what to write instead for the common cases (SPEC 13: each problem names
// its field and the fix). Other lines are kept as they are.
func decodeProblem(line string) string {
	rest, ok := strings.CutPrefix(line, "'")
	if !ok {
		return line
	}
	path, what, ok := strings.Cut(rest, "' ")
	if !ok {
		return line
	}
	if path == rootType {
		path = "the top level"
	}
	switch {
	case strings.Contains(what, "as 'bool'"):
		what = "is not true or false"
	case strings.Contains(what, "as 'int"), strings.Contains(what, "as 'uint"):
		what = "is not a whole number: write digits only (sizes in bytes, e.g. 10485760)"
	case strings.Contains(what, "as 'float"):
		what = "is not a number (e.g. 0.5)"
	case strings.HasPrefix(what, "time: "):
		what = "is not a Go duration such as 30s or 5m (" + what + ")"
	}
	return path + ": " + what
}

// rootType names the whole Config in mapstructure's errors.
var rootType = reflect.TypeOf(Config{}).String()

// unknownKeys turns mapstructure's "'<path>' has invalid keys: a, b" into
// one problem per key, "<path>.a: unknown key ...".
func unknownKeys(line string) (Problems, bool) {
	rest, ok := strings.CutPrefix(line, "'")
	if !ok {
		return nil, false
	}
	name, keys, ok := strings.Cut(rest, "' has invalid keys: ")
	if !ok {
		return nil, false
	}
	if name == rootType {
		name = ""
	}
	var out Problems
	for _, k := range strings.Split(keys, ", ") {
		out = append(out, fmt.Sprintf("%s: unknown key (check its spelling against SPEC 13)", joinPath(name, k)))
	}
	return out, true
}

func envMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if i := strings.IndexByte(kv, '='); i > 0 {
			m[kv[:i]] = kv[i+1:]
		}
	}
	return m
}

// sections lists the top-level keys an env override may address; longest
// first so SMART_ROUTING wins over ROUTING.
var sections = []string{"smart_routing", "responses", "data_dir", "routing", "server", "admin", "redis", "audit", "tracing", "cache"}

// envOverrides maps SWITCHYARD_<SECTION>_<KEY> to section.key. Lists
// (redis.addrs, routing.fallback_models) accept comma-separated values.
func envOverrides(env map[string]string) (map[string]any, Problems) {
	out := map[string]any{}
	var problems Problems
	for name, value := range env {
		if !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		rest := strings.ToLower(strings.TrimPrefix(name, EnvPrefix))
		matched := false
		for _, s := range sections {
			if rest == s && s == "data_dir" {
				out["data_dir"] = value
				matched = true
				break
			}
			if strings.HasPrefix(rest, s+"_") {
				out[s+"."+strings.TrimPrefix(rest, s+"_")] = value
				matched = true
				break
			}
		}
		if !matched {
			problems = append(problems, fmt.Sprintf("%s: environment override names no known section (want SWITCHYARD_<SECTION>_<KEY>, sections %s)", name, strings.Join(sections, ", ")))
		}
	}
	return out, problems
}

var secretRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandSecrets replaces ${NAME} in every string of the tree, in place. A
// reference to an unset variable is left empty; validation then names the
// empty field where empty is wrong, and unsetCredentials, before, names an
// unset variable in a provider's credentials, where empty is often valid.
func expandSecrets(v any, env map[string]string) any {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			t[k] = expandSecrets(child, env)
		}
		return t
	case []any:
		for i, child := range t {
			t[i] = expandSecrets(child, env)
		}
		return t
	case string:
		if !strings.Contains(t, "${") {
			return t
		}
		return secretRef.ReplaceAllStringFunc(t, func(ref string) string {
			return env[secretRef.FindStringSubmatch(ref)[1]]
		})
	default:
		return v
	}
}

func joinPath(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// applyItemDefaults fills defaults inside list items and maps that koanf's
// scalar defaults cannot reach.
func applyItemDefaults(c *Config) {
	if c.Server.NodeID == "" {
		c.Server.NodeID, _ = os.Hostname()
	}
	if c.Server.MaxInflightBodyBytes == 0 && c.Server.MaxBodyBytes > 0 {
		c.Server.MaxInflightBodyBytes = DefaultMaxInflightBodyBytes(c.Server.MaxBodyBytes)
	}
	for i := range c.Deployments {
		ApplyDeploymentDefaults(&c.Deployments[i])
	}
	for i := range c.Teams {
		t := &c.Teams[i]
		t.Budget.ApplyDefaults()
		t.UserLimits.Budget.ApplyDefaults()
		for j := range t.Keys {
			t.Keys[j].Budget.ApplyDefaults()
		}
	}
	for i := range c.Models {
		if c.Models[i].Strategy == "" {
			c.Models[i].Strategy = c.Routing.DefaultStrategy
		}
		if c.Models[i].Objective == "" {
			c.Models[i].Objective = "balanced"
		}
	}
	ma := DefaultMaxAttempts()
	for op, modes := range c.Routing.MaxAttempts {
		if ma[op] == nil {
			ma[op] = map[string]int{}
		}
		for mode, n := range modes {
			ma[op][mode] = n
		}
	}
	c.Routing.MaxAttempts = ma
	pts := DefaultPoints()
	for k, v := range c.SmartRouting.Points {
		pts[k] = v
	}
	c.SmartRouting.Points = pts
	for i := range c.SmartRouting.Routes {
		if c.SmartRouting.Routes[i].DefaultTier == "" {
			c.SmartRouting.Routes[i].DefaultTier = "easy"
		}
	}
	for i := range c.Routing.Fallbacks {
		if c.Routing.Fallbacks[i].Reason == "" {
			c.Routing.Fallbacks[i].Reason = "general"
		}
	}
}

// ApplyDeploymentDefaults fills a deployment's optional fields; the admin API
// uses it for PUT bodies too.
func ApplyDeploymentDefaults(d *Deployment) {
	if d.UpstreamModel == "" {
		d.UpstreamModel = d.Model
	}
	if len(d.Operations) == 0 {
		d.Operations = []string{"chat"}
	}
	if d.Weight == 0 {
		d.Weight = 1
	}
}

// simulateDefaults are a simulated provider's profile defaults (SPEC 13).
// They are filled into the raw tree before decoding, so an explicit 0 (for
// example ttfb: 0s in a benchmark) stays 0.
var simulateDefaults = map[string]any{
	"ttfb": "20ms", "tokens_per_second": 500, "output_tokens": 16, "error_rate": 0,
	"error_status": 503, "context_tokens": 128000, "embedding_dims": 8,
}

func defaultSimulate(tree map[string]any) {
	list, _ := tree["providers"].([]any)
	for _, item := range list {
		p, ok := item.(map[string]any)
		if !ok {
			continue
		}
		sim, ok := p["simulate"].(map[string]any)
		if !ok {
			if p["simulate"] != nil {
				continue // wrong type: the decoder reports it
			}
			sim = map[string]any{}
			p["simulate"] = sim
		}
		for k, v := range simulateDefaults {
			if _, set := sim[k]; !set {
				sim[k] = v
			}
		}
	}
}

// wholeNumberHook refuses what the decoder would turn into an integer of
// another meaning: a YAML number with a fraction or beyond int64 (it
// truncates: max_parallel: 0.5 was 0, no limit), and an empty string (a
// ${VAR} that is not set: rpm: ${TEAM_RPM} was 0, no limit). Durations
// arrive here already parsed from their strings.
func wholeNumberHook(from, to reflect.Type, data any) (any, error) {
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
	default:
		return data, nil
	}
	switch from.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := reflect.ValueOf(data).Float(); f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return nil, fmt.Errorf("must be a whole number, got %v", f)
		}
	case reflect.String:
		if strings.TrimSpace(reflect.ValueOf(data).String()) == "" {
			return nil, errors.New("is empty (is its ${ENV} variable set?): write a whole number")
		}
	}
	return data, nil
}

// durationType is the type of every duration setting.
var durationType = reflect.TypeOf(time.Duration(0))

// bareDurationHook refuses a duration written as a number other than 0
// (SPEC 13: durations in Go syntax, 30s or 5m). The decoder took it as
// nanoseconds: upstream_timeout: 30 was 30ns, every attempt timed out at
// once, and check said ok (the same value as an environment override, a
// string, was refused for its missing unit). A bare 0 is zero.
func bareDurationHook(from, to reflect.Type, data any) (any, error) {
	if to != durationType {
		return data, nil
	}
	v := reflect.ValueOf(data)
	switch from.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Int() == 0 {
			return time.Duration(0), nil
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if v.Uint() == 0 {
			return time.Duration(0), nil
		}
	case reflect.Float32, reflect.Float64:
		if v.Float() == 0 {
			return time.Duration(0), nil
		}
	default:
		return data, nil
	}
	return nil, fmt.Errorf("%v has no unit: write a Go duration such as \"%vs\" or \"5m\" (a bare number would be nanoseconds)", data, data)
}

// keySpecHook decodes a team key given as a plain string into a KeySpec.
func keySpecHook(from, to reflect.Type, data any) (any, error) {
	if to == reflect.TypeOf(KeySpec{}) && from.Kind() == reflect.String {
		return KeySpec{Key: data.(string)}, nil
	}
	return data, nil
}
