package config

import (
	"fmt"
	"sort"
	"strings"
)

// credentialFields are a provider's fields that hold a secret or point to
// one (SPEC 10, 13). Each may be empty on purpose (a local vLLM needs no
// api_key, a bedrock provider without keys uses the AWS default credential
// chain, a vertex one Application Default Credentials), so an empty value
// is no problem to Validate; but a ${NAME} whose variable is not set is a
// forgotten secret, which would otherwise surface only as upstream 401s
// (502s to clients) or as a different identity at runtime.
var credentialFields = []string{
	"api_key", "credentials_json", "credentials_file",
	"aws_access_key_id", "aws_secret_access_key", "aws_session_token",
}

// unsetCredentials names every ${NAME} in a provider's credential field (or
// header value: Azure's api-key, an organization id) whose variable is not
// in env, with the fix. A variable set to "" is an explicit empty value and
// passes; so does a field that is not written. It reads the raw tree, before
// expandSecrets, in which an unset reference and an empty value look alike.
func unsetCredentials(tree map[string]any, env map[string]string) Problems {
	list, _ := tree["providers"].([]any)
	var out Problems
	for i, item := range list {
		pr, ok := item.(map[string]any)
		if !ok {
			continue
		}
		f := fmt.Sprintf("providers[%d]", i)
		kind, _ := pr["kind"].(string)
		for _, field := range credentialFields {
			for _, name := range unsetRefs(pr[field], env) {
				out = append(out, fmt.Sprintf("%s.%s: ${%s} is not set in the environment; %s", f, field, name, unsetFix(kind, field, name)))
			}
		}
		headers, _ := pr["headers"].(map[string]any)
		for h, v := range headers {
			for _, name := range unsetRefs(v, env) {
				out = append(out, fmt.Sprintf("%s.headers.%s: ${%s} is not set in the environment; set %s, or remove the header", f, h, name, name))
			}
		}
	}
	sort.Strings(out) // headers come from a map
	return out
}

// unsetRefs returns the variables v (a string) references that env lacks.
func unsetRefs(v any, env map[string]string) []string {
	s, ok := v.(string)
	if !ok || !strings.Contains(s, "${") {
		return nil
	}
	var out []string
	for _, m := range secretRef.FindAllStringSubmatch(s, -1) {
		if _, set := env[m[1]]; !set {
			out = append(out, m[1])
		}
	}
	return out
}

// unsetFix is the way out for an unset variable in a credential field.
func unsetFix(kind, field, name string) string {
	switch {
	case field == "api_key" && kind == "gemini":
		return fmt.Sprintf("set %s to the Gemini API key (kind gemini needs one)", name)
	case field == "api_key" && kind == "bedrock":
		return fmt.Sprintf("set %s to the Bedrock API key, or remove api_key to sign with SigV4 (the aws_* keys, or the AWS default credential chain)", name)
	case field == "api_key":
		return fmt.Sprintf("set %s, or remove api_key for an upstream that needs no key (a local vLLM)", name)
	case strings.HasPrefix(field, "credentials_"):
		return fmt.Sprintf("set %s, or remove %s to use Application Default Credentials", name, field)
	default: // aws_*
		return fmt.Sprintf("set %s, or remove aws_access_key_id, aws_secret_access_key and aws_session_token to use the AWS default credential chain", name)
	}
}

// withoutFields drops from p the problems of the fields that unset already
// reports ("providers[0].api_key: required for kind gemini" after "...:
// ${GEMINI_API_KEY} is not set"): one problem per field, the one with the
// cause.
func withoutFields(p, unset Problems) Problems {
	if len(unset) == 0 {
		return p
	}
	fields := map[string]bool{}
	for _, u := range unset {
		field, _, _ := strings.Cut(u, ": ")
		fields[field] = true
	}
	out := p[:0:0]
	for _, q := range p {
		if field, _, ok := strings.Cut(q, ": "); ok && fields[field] {
			continue
		}
		out = append(out, q)
	}
	return out
}
