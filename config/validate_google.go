package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// validateGoogle checks a gemini or vertex provider (SPEC 10, 13): every
// missing field is named, so `switchyard check` lists them all at once.
// Secrets are never quoted: a broken credentials_json is described, not
// shown.
func validateGoogle(pr Provider, f string) Problems {
	var p Problems
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if pr.BaseURL != "" {
		if u, err := url.Parse(pr.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("%s.base_url: %q is not an http(s) URL", f, RedactURL(pr.BaseURL))
		}
	}
	if pr.Kind == "gemini" {
		if pr.APIKey == "" {
			add("%s.api_key: required for kind gemini (the Gemini API key, e.g. ${GEMINI_API_KEY})", f)
		}
		return p
	}
	if pr.Project == "" {
		add("%s.project: required for kind vertex (the Google Cloud project id)", f)
	}
	if pr.Region == "" {
		add("%s.region: required for kind vertex (a location such as us-central1, or global)", f)
	} else if strings.ContainsAny(pr.Region, "/?#@: ") {
		add("%s.region: %q is not a location name", f, pr.Region)
	}
	if pr.CredentialsFile != "" && pr.CredentialsJSON != "" {
		add("%s: give credentials_file or credentials_json, not both", f)
	}
	if pr.CredentialsJSON != "" {
		for _, q := range CredentialsProblems([]byte(pr.CredentialsJSON)) {
			add("%s.credentials_json: %s", f, q)
		}
	}
	return p
}

// CredentialsProblems checks a Google credentials JSON without quoting it:
// a service-account key must name client_email and private_key (token_uri
// defaults to Google's), an authorized_user one its client and refresh
// token. nil when it looks usable.
func CredentialsProblems(b []byte) []string {
	var key map[string]any
	if err := json.Unmarshal(b, &key); err != nil {
		return []string{"not a JSON object (expected a service-account key file's content)"}
	}
	str := func(k string) string { s, _ := key[k].(string); return s }
	var need []string
	switch t := str("type"); t {
	case "service_account":
		need = []string{"client_email", "private_key"}
	case "authorized_user":
		need = []string{"client_id", "client_secret", "refresh_token"}
	case "external_account", "impersonated_service_account":
		return nil // the oauth2 library checks the rest
	case "":
		return []string{"missing type (expected \"service_account\")"}
	default:
		return []string{fmt.Sprintf("type %q is not a supported credential type (service_account, authorized_user, external_account)", t)}
	}
	var missing []string
	for _, k := range need {
		if str(k) == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return []string{"missing " + strings.Join(missing, ", ")}
	}
	return nil
}
