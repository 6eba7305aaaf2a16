package config

import (
	"strings"
	"testing"
)

// TestValidateGoogleProviders: `switchyard check` names every missing
// field of a gemini or vertex provider at once (SPEC 10, 13), and never
// quotes a credential.
func TestValidateGoogleProviders(t *testing.T) {
	yml := `
providers:
  - {name: g, kind: gemini}
  - {name: v, kind: vertex}
  - {name: both, kind: vertex, project: p, region: us-central1, credentials_file: /k.json, credentials_json: '{"type":"service_account","client_email":"a@b","private_key":"secret-pem"}'}
  - {name: broken, kind: vertex, project: p, region: "europe west", credentials_json: '{"type":"service_account","private_key_id":"kid","client_email":"x"}'}
  - {name: notjson, kind: vertex, project: p, region: global, credentials_json: 'hunter2-not-json'}
  - {name: ok-adc, kind: vertex, project: p, region: global}
  - {name: ok-gemini, kind: gemini, api_key: k, base_url: "ftp://x"}
deployments:
  - {id: d, model: m, provider: ok-adc}
teams: [{name: t, keys: [k1], models: ["*"]}]
`
	_, err := Load([]byte(yml), nil)
	if err == nil {
		t.Fatal("config accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		"providers[0].api_key: required for kind gemini",
		"providers[1].project: required for kind vertex",
		"providers[1].region: required for kind vertex",
		"providers[2]: give credentials_file or credentials_json, not both",
		`providers[3].region: "europe west" is not a location name`,
		"providers[3].credentials_json: missing private_key",
		"providers[4].credentials_json: not a JSON object",
		`providers[6].base_url: "ftp://x" is not an http(s) URL`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing problem %q in:\n%s", want, msg)
		}
	}
	for _, secret := range []string{"secret-pem", "hunter2"} {
		if strings.Contains(msg, secret) {
			t.Errorf("problems quote a credential (%s):\n%s", secret, msg)
		}
	}
	if strings.Contains(msg, "providers[5]") {
		t.Errorf("a vertex provider on ADC was refused:\n%s", msg)
	}
}

func TestValidateGooglePrices(t *testing.T) {
	yml := `
providers: [{name: g, kind: gemini, api_key: k}]
deployments: [{id: d, model: m, provider: g, price: {input: 1, output: 2, cached_input: -1}}]
teams: [{name: t, keys: [k1], models: ["*"]}]
`
	if _, err := Load([]byte(yml), nil); err == nil || !strings.Contains(err.Error(), "price.cached_input: must not be negative") {
		t.Fatalf("negative cached_input: %v", err)
	}
}
