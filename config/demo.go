package config

import _ "embed"

// DemoKey is the demo team's key, printed at start by the zero-setup demo.
const DemoKey = "sk-switchyard-demo"

//go:embed demo.yaml
var demoYAML []byte

// DemoYAML returns the built-in demo configuration of SPEC 13: simulated
// providers, a demo team, two tier routes and a fallback chain, local-only.
func DemoYAML() []byte { return demoYAML }

// Demo loads the built-in demo configuration. Env overrides apply as usual.
func Demo(environ []string) (*Config, error) { return Load(demoYAML, environ) }
