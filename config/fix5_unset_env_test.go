package config

import (
	"strings"
	"testing"
)

// TestUnsetCredentialVariable: a ${VAR} that is not set in a provider's
// credential field is a start-time problem naming the field, the variable
// and the fix, listed with every other problem, not an empty credential
// that shows only as 502s at runtime. A provider written without a key, an
// explicitly empty value and a variable set to "" stay valid.
func TestUnsetCredentialVariable(t *testing.T) {
	const tail = `
deployments: [{id: a, model: m, provider: p}]
teams: [{name: t, keys: [k1], models: ["*"]}]
`
	cases := []struct {
		name, providers string
		env             []string
		want            []string // each must appear; none: the config loads
	}{
		{"openai api_key unset", `[{name: p, kind: openai, base_url: "https://x/v1", api_key: "${OPENAI_API_KEY}"}]`, nil,
			[]string{"providers[0].api_key", "${OPENAI_API_KEY}", "not set"}},
		{"anthropic api_key unset, inside a longer value", `[{name: p, kind: anthropic, base_url: "https://x/v1", api_key: "sk-${ANT_SUFFIX}"}]`, nil,
			[]string{"providers[0].api_key", "${ANT_SUFFIX}"}},
		{"gemini api_key unset", `[{name: p, kind: gemini, api_key: "${GEMINI_API_KEY}"}]`, nil,
			[]string{"providers[0].api_key", "${GEMINI_API_KEY}", "not set"}},
		{"vertex credentials_json unset", `[{name: p, kind: vertex, project: x, region: global, credentials_json: "${VERTEX_SA_JSON}"}]`, nil,
			[]string{"providers[0].credentials_json", "${VERTEX_SA_JSON}", "Application Default Credentials"}},
		{"vertex credentials_file unset", `[{name: p, kind: vertex, project: x, region: global, credentials_file: "${SA_PATH}"}]`, nil,
			[]string{"providers[0].credentials_file", "${SA_PATH}"}},
		{"bedrock keys unset", `[{name: p, kind: bedrock, region: us-east-1, aws_access_key_id: "${AWS_ID}", aws_secret_access_key: "${AWS_SECRET}"}]`, nil,
			[]string{"providers[0].aws_access_key_id", "${AWS_ID}", "providers[0].aws_secret_access_key", "${AWS_SECRET}", "default credential chain"}},
		{"bedrock session token unset", `[{name: p, kind: bedrock, region: us-east-1, aws_access_key_id: id, aws_secret_access_key: s, aws_session_token: "${AWS_TOKEN}"}]`, nil,
			[]string{"providers[0].aws_session_token", "${AWS_TOKEN}"}},
		{"bedrock api_key unset", `[{name: p, kind: bedrock, region: us-east-1, api_key: "${BEDROCK_KEY}"}]`, nil,
			[]string{"providers[0].api_key", "${BEDROCK_KEY}"}},
		{"header unset", `[{name: p, kind: openai, base_url: "https://x/v1", headers: {api-key: "${AZURE_KEY}"}}]`, nil,
			[]string{"providers[0].headers.api-key", "${AZURE_KEY}"}},
		{"listed with the other problems", `[{name: p, kind: openai, base_url: "ftp://x", api_key: "${OPENAI_API_KEY}"}]`, nil,
			[]string{"providers[0].api_key", "${OPENAI_API_KEY}", "providers[0].base_url"}},

		{"openai api_key set", `[{name: p, kind: openai, base_url: "https://x/v1", api_key: "${OPENAI_API_KEY}"}]`, []string{"OPENAI_API_KEY=sk-1"}, nil},
		{"local vLLM without api_key", `[{name: p, kind: openai, base_url: "http://127.0.0.1:8000/v1"}]`, nil, nil},
		{"explicitly empty api_key", `[{name: p, kind: openai, base_url: "http://127.0.0.1:8000/v1", api_key: ""}]`, nil, nil},
		{"variable set to empty", `[{name: p, kind: openai, base_url: "http://127.0.0.1:8000/v1", api_key: "${VLLM_KEY}"}]`, []string{"VLLM_KEY="}, nil},
		{"simulated", `[{name: p, kind: simulated}]`, nil, nil},
		{"bedrock default chain", `[{name: p, kind: bedrock, region: us-east-1, aws_session_token: ""}]`, nil, nil},
		{"vertex ADC", `[{name: p, kind: vertex, project: x, region: global}]`, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte("providers: "+tc.providers+"\n"+tail), tc.env)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("want the config to load, got:\n%v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want a problem naming %q, the config loaded", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("want a problem mentioning %q, got:\n%v", w, err)
				}
			}
		})
	}
}
