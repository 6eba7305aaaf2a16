package config

import (
	"net/url"
	"regexp"
)

// awsRegion is the shape of an AWS region name (us-east-1, eu-central-2,
// us-gov-west-1): it becomes a host name, so nothing else may pass.
var awsRegion = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d+$`)

// validateBedrock checks a bedrock provider (SPEC 10, 13): a region, an
// optional http(s) base URL, and static AWS keys that come as a pair. Each
// missing field is named; no secret is quoted.
func validateBedrock(pr Provider, f string, add func(string, ...any)) {
	switch {
	case pr.Region == "":
		add("%s.region: required for kind bedrock (e.g. us-east-1)", f)
	case !awsRegion.MatchString(pr.Region):
		add("%s.region: %q is not an AWS region name (e.g. us-east-1)", f, pr.Region)
	}
	if pr.BaseURL != "" {
		if u, err := url.Parse(pr.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("%s.base_url: %q is not an http(s) URL", f, RedactURL(pr.BaseURL))
		}
	}
	if pr.APIKey != "" {
		return // a Bedrock API key replaces SigV4; the AWS keys are unused
	}
	id, secret := pr.AWSAccessKeyID != "", pr.AWSSecretAccessKey != ""
	switch {
	case id && !secret:
		add("%s.aws_secret_access_key: required with aws_access_key_id", f)
	case secret && !id:
		add("%s.aws_access_key_id: required with aws_secret_access_key", f)
	case !id && pr.AWSSessionToken != "":
		add("%s.aws_access_key_id, %s.aws_secret_access_key: required with aws_session_token", f, f)
	}
}
