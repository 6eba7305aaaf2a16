package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// hostile5Base is a minimal valid document, in YAML flow style; each case
// adds one section.
const hostile5Base = "providers: [{name: sim, kind: simulated}]\n" +
	"deployments: [{id: a, model: m, provider: sim}]\n" +
	"teams: [{name: t, models: [\"*\"], keys: [k1]}]\n"

// hostile5JSONBase is hostile5Base as a JSON document, without its closing
// brace: a case appends its members.
const hostile5JSONBase = `{"providers": [{"name": "sim", "kind": "simulated"}],` +
	`"deployments": [{"id": "a", "model": "m", "provider": "sim"}],` +
	`"teams": [{"name": "t", "models": ["*"], "keys": ["k1"]}]`

// loadNoPanic is Load, with a panic turned into a test failure.
func loadNoPanic(t *testing.T, doc string) (c *Config, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("Load panicked on %s: %v", doc, r)
			err = errors.New("panicked")
		}
	}()
	return Load([]byte(doc), nil)
}

// A JSON config file (SPEC 13 reads YAML; parseDocument reads a JSON
// object with a JSON parser) kept its numbers as json.Number, a string
// type, and the decode hooks that convert strings asserted data.(string):
// a duration written as a JSON number (`"upstream_timeout": 30`) or a team
// key written as one (`"keys": [123]`) panicked in Load. `switchyard
// check` and `serve` crashed instead of listing the problem, and a SIGHUP
// reload of such a file crashed the running node. A JSON number now reads
// as YAML reads it.
func TestHostile5JSONNumbersDoNotPanic(t *testing.T) {
	for _, tc := range []struct{ members, want string }{
		{`"server": {"upstream_timeout": 30}`, "server.upstream_timeout"},
		{`"routing": {"cooldown_base": 1.5}`, "routing.cooldown_base"},
		{`"teams": [{"name": "u", "models": ["*"], "keys": [12345678]}]`, "teams[0].keys[0]"}, // as YAML refuses it
		{`"teams": [{"name": "u", "models": ["*"], "keys": [{"key": 12345678}]}]`, ""},
		{`"server": {"max_body_bytes": 99999999999999999999999}`, "server.max_body_bytes"},
	} {
		doc := hostile5JSONBase + "," + tc.members + "}"
		if strings.Contains(tc.members, `"teams"`) {
			doc = `{"providers": [{"name": "sim", "kind": "simulated"}], "deployments": [{"id": "a", "model": "m", "provider": "sim"}], ` + tc.members + "}"
		}
		_, err := loadNoPanic(t, doc)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.members, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want a problem naming %s", tc.members, err, tc.want)
		}
	}
	// the same numbers decode as in YAML
	c, err := loadNoPanic(t, hostile5JSONBase+`, "server": {"max_body_bytes": 2048, "max_messages": 7}, "routing": {"latency_buffer": 0.25, "retry_after": 0}}`)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.MaxBodyBytes != 2048 || c.Server.MaxMessages != 7 || c.Routing.LatencyBuffer != 0.25 || c.Routing.RetryAfter != 0 {
		t.Fatalf("decoded %+v %+v", c.Server, c.Routing)
	}
}

// SPEC 13: "Durations in Go syntax (30s, 5m)". A duration written as a bare
// number was taken as nanoseconds: `upstream_timeout: 30` made every
// attempt time out at once (every request 504) and `read_timeout: 30` every
// body read (every request 408), and `switchyard check` said ok. The same
// value given as SWITCHYARD_SERVER_READ_TIMEOUT=30 was refused ("missing
// unit"). A bare number other than 0 is now a problem naming the field;
// 0 (no unit needed) still means zero.
func TestHostile5DurationsNeedAUnit(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"server: {upstream_timeout: 30}", "server.upstream_timeout"},
		{"server: {read_timeout: 30}", "server.read_timeout"},
		{"server: {request_timeout: 600}", "server.request_timeout"},
		{"redis: {timeout: 0.05}", "redis.timeout"},
		{"routing: {cooldown_base: 5}", "routing.cooldown_base"},
		{"cache: {ttl: 3600}", "cache.ttl"},
		{"providers: [{name: sim, kind: simulated, simulate: {ttfb: 20}}]", "providers[0].simulate.ttfb"},
	} {
		doc := hostile5Base + tc.doc + "\n"
		if strings.HasPrefix(tc.doc, "providers:") {
			doc = strings.Replace(hostile5Base, "providers: [{name: sim, kind: simulated}]\n", tc.doc+"\n", 1)
		}
		_, err := loadNoPanic(t, doc)
		if err == nil {
			t.Errorf("%s: accepted (as nanoseconds), want a problem naming %s", tc.doc, tc.want)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, "unit") {
			t.Errorf("%s: %v, want a problem naming %s and saying it needs a unit", tc.doc, err, tc.want)
		}
	}
	c, err := loadNoPanic(t, hostile5Base+"routing: {retry_after: 0, probe_interval: 0, cooldown_base: 2s}\n")
	if err != nil {
		t.Fatalf("a bare 0 is a duration: %v", err)
	}
	if c.Routing.RetryAfter != 0 || c.Routing.ProbeInterval != 0 || c.Routing.CooldownBase != 2*time.Second {
		t.Fatalf("routing %+v", c.Routing)
	}
}

// `switchyard check` validates a config and lists every problem (SPEC 13),
// and checked server.metrics_listen as host:port, but not server.listen:
// `listen: 8080` (a YAML number) or `listen: localhost` passed check, and
// serve then failed at start ("missing port in address").
func TestHostile5ListenIsHostPort(t *testing.T) {
	for _, tc := range []struct {
		listen string
		ok     bool
	}{
		{`":8080"`, true},
		{`"127.0.0.1:0"`, true},
		{`"[::1]:9000"`, true},
		{`8080`, false},
		{`"localhost"`, false},
		{`"http://0.0.0.0:8080"`, false},
	} {
		_, err := loadNoPanic(t, hostile5Base+"server: {listen: "+tc.listen+"}\n")
		switch {
		case tc.ok && err != nil:
			t.Errorf("listen %s: refused: %v", tc.listen, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "server.listen:")):
			t.Errorf("listen %s: %v, want a problem naming server.listen", tc.listen, err)
		}
	}
}

// SPEC 13: check lists every problem with the field's path and the fix. A
// value the decoder could not read was reported twice: once in
// mapstructure's words ("'server.max_body_bytes' cannot parse value as
// 'int64': strconv.ParseInt: invalid syntax", no fix, another path format),
// then again by validation for the zero left in its place ("must be > 0,
// got 0", which is not what the file says). Each such field is now one
// problem, "<path>: ...", saying what to write.
func TestHostile5UnreadableValueIsOneProblem(t *testing.T) {
	doc := hostile5Base + "server: {max_body_bytes: 10MiB, upstream_timeout: 30, read_timeout: soon}\n" +
		"routing: {last_resort: maybe, latency_buffer: lots}\nsmart_routing: {threshold: high}\n"
	_, err := loadNoPanic(t, doc)
	var p Problems
	if !errors.As(err, &p) {
		t.Fatalf("%v, want Problems", err)
	}
	fields := map[string]int{}
	for _, line := range p {
		if strings.HasPrefix(line, "'") {
			t.Errorf("problem not in the <path>: form: %s", line)
		}
		field, _, _ := strings.Cut(line, ": ")
		fields[strings.Trim(field, "'")]++
	}
	for field, hint := range map[string]string{
		"server.max_body_bytes":   "whole number",
		"server.upstream_timeout": "unit",
		"server.read_timeout":     "duration",
		"routing.last_resort":     "true or false",
		"routing.latency_buffer":  "number",
		"smart_routing.threshold": "whole number",
	} {
		if fields[field] != 1 {
			t.Errorf("%s: %d problems, want 1:\n%v", field, fields[field], err)
		}
		found := false
		for _, line := range p {
			if strings.HasPrefix(line, field+": ") && strings.Contains(line, hint) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no problem saying %q:\n%v", field, hint, err)
		}
	}
}

// server.node_id starts every request id the node gives (gateway's
// newRequestID), which is sent in the X-Request-Id and request-id headers
// and which clients send back to name the request (SPEC 12.2), and it
// names the node in heartbeats and audit entries. It was not checked: a
// node_id with a newline or a space gave request ids that net/http rewrote
// in the header (newline to space), so the id a client saw named no audit
// entry, and that the gateway itself refuses when a client sends it back
// (newRequestID takes printable ASCII only).
func TestHostile5NodeIDIsARequestIDPrefix(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{`"gw-1"`, true},
		{`"node_1.eu-west"`, true},
		{`""`, true}, // the hostname
		{`"a\nb"`, false},
		{`"eu west 1"`, false},
		{`"nœud"`, false},
		{`"` + strings.Repeat("n", 65) + `"`, false},
	} {
		_, err := loadNoPanic(t, hostile5Base+"server: {node_id: "+tc.id+"}\n")
		switch {
		case tc.ok && err != nil:
			t.Errorf("node_id %s: refused: %v", tc.id, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "server.node_id:")):
			t.Errorf("node_id %s: %v, want a problem naming server.node_id", tc.id, err)
		}
	}
}
