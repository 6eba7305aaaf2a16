package config

import _ "embed"

// DemoKey is the demo team's key, printed at start by the zero-setup demo.
const DemoKey = "sk-switchyard-demo"

//go:embed demo.yaml
var demoYAML []byte

// Demo loads the built-in demo configuration. Env overrides apply as usual.
func Demo(environ []string) (*Config, error) { return Load(demoYAML, environ) }
