package config

import (
	"strings"
	"testing"
)

// TestBedrockValidation: a bedrock provider names every missing field
// (SPEC 10, 13) and never quotes a secret.
func TestBedrockValidation(t *testing.T) {
	cases := []struct {
		name, provider string
		want           []string // every one must be reported
		ok             bool
	}{
		{"no region", "{name: b, kind: bedrock}", []string{"providers[0].region: required"}, false},
		{"bad region", "{name: b, kind: bedrock, region: 'evil.com/x'}", []string{"providers[0].region: \"evil.com/x\" is not an AWS region"}, false},
		{"id without secret", "{name: b, kind: bedrock, aws_access_key_id: AKIAEXAMPLEEXAMPLE12}",
			[]string{"providers[0].region: required", "providers[0].aws_secret_access_key: required"}, false},
		{"secret without id", "{name: b, kind: bedrock, region: us-east-1, aws_secret_access_key: s3cr3t-value}",
			[]string{"providers[0].aws_access_key_id: required"}, false},
		{"token alone", "{name: b, kind: bedrock, region: us-east-1, aws_session_token: tok}",
			[]string{"providers[0].aws_access_key_id, providers[0].aws_secret_access_key: required"}, false},
		{"bad base url", "{name: b, kind: bedrock, region: us-east-1, base_url: 'ftp://x'}", []string{"providers[0].base_url"}, false},
		{"default chain", "{name: b, kind: bedrock, region: us-east-1}", nil, true},
		{"static keys", "{name: b, kind: bedrock, region: eu-central-1, aws_access_key_id: AKIAEXAMPLEEXAMPLE12, aws_secret_access_key: s3cr3t, aws_session_token: tok}", nil, true},
		{"api key", "{name: b, kind: bedrock, region: us-west-2, api_key: bedrock-key}", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			yaml := "providers:\n  - " + tc.provider + "\n"
			_, err := Load([]byte(yaml), nil)
			if tc.ok {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want problems %q, got none", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("want a problem mentioning %q, got:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("a problem quotes the secret: %v", err)
			}
		})
	}
}
