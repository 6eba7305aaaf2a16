// Package redact masks what is shaped like a credential in text the
// gateway relays, records or logs (SPEC 15): OpenAI and Anthropic keys
// (sk-, sk-ant-), AWS access key ids (AKIA, ASIA), Google API keys (AIza),
// Bearer tokens and JWTs, whoever's they are, also when JSON-escaped.
//
// It is for error text, audit entries and logs, never for a model's answer.
package redact

import (
	"regexp"
	"strings"
)

// keep is how many characters of a credential stay readable, so an
// operator can tell which key it was.
const keep = 6

// mask replaces the rest of a credential.
const mask = "****"

// escaped is one JSON \u escape of a printable ASCII character: JSON text
// may spell any key character that way.
const escaped = `\\u00[2-7][0-9A-Fa-f]`

// keyChar is one character of a key: a letter, digit, '-' or '_', written
// plainly or as a JSON escape.
const keyChar = `(?:[A-Za-z0-9_-]|` + escaped + `)`

// tokenChar is one character of a Bearer token (RFC 6750's b64token), plain,
// JSON-escaped, or the JSON escape of '/'.
const tokenChar = `(?:[A-Za-z0-9._~+/=-]|\\/|` + escaped + `)`

// boundary is where a credential may start: a word boundary, so "task-..."
// is not an "sk-" key, or right after a JSON escape of a character that is
// not a word character (\n, \t, \u003c, \u0022, non-ASCII ...): the escape
// ends in a letter or digit, so \b sees none there although the text it
// stands for has one. The escape is part of the match (RE2 has no
// look-behind); maskOne keeps it.
const boundary = `(?:\b|\\[bfnrt]|\\u(?:00(?:[01][0-9A-Fa-f]|2[0-9A-Fa-f]|3[A-Fa-f]|40|5[B-Eb-e]|60|7[B-Fb-f]|[89A-Fa-f][0-9A-Fa-f])|0[1-9A-Fa-f][0-9A-Fa-f]{2}|[1-9A-Fa-f][0-9A-Fa-f]{3}))`

// credential matches every shape SPEC 15 names, each after a boundary. An
// HTTP auth scheme is case-insensitive (RFC 9110), so is "Bearer".
var credential = regexp.MustCompile(boundary + `(?:` +
	`sk(?:-|\\u002[dD])` + keyChar + `{16,}` +
	`|(?:AKIA|ASIA)[A-Z0-9]{16}` +
	`|AIza` + keyChar + `{35}` +
	`|(?i:bearer)(?:[ \t]|\\u0020|%20)+` + tokenChar + `{8,}` +
	`|eyJ` + keyChar + `{8,}\.` + keyChar + `{8,}\.` + keyChar + `{8,})`)

// quick are the substrings one of which every credential contains: text
// holding none of them is returned without running the expression.
var quick = []string{"sk", "AKIA", "ASIA", "AIza", "earer", "eyJ"}

// Credentials returns s with every credential-shaped string masked after
// its first six characters (a JSON escape counts as one character, so a
// masked JSON string stays valid JSON). s itself when it holds none.
func Credentials(s string) string {
	if !maybe(s) {
		return s
	}
	return credential.ReplaceAllStringFunc(s, maskOne)
}

// maybe reports whether s holds one of quick, in one pass: it runs on
// every string of every request's log line, and six Contains over each
// cost that line about 0.35 us (BenchmarkRequestLine).
func maybe(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case 's':
			if strings.HasPrefix(s[i:], "sk") {
				return true
			}
		case 'A':
			if t := s[i:]; strings.HasPrefix(t, "AKIA") || strings.HasPrefix(t, "ASIA") || strings.HasPrefix(t, "AIza") {
				return true
			}
		case 'e':
			if t := s[i:]; strings.HasPrefix(t, "earer") || strings.HasPrefix(t, "eyJ") {
				return true
			}
		case 'E':
			if t := s[i:]; len(t) >= 5 && strings.EqualFold(t[:5], "earer") {
				return true
			}
		}
	}
	return false
}

// maskOne keeps the first keep characters of a match and masks the rest;
// a JSON escape the match starts with is its boundary, kept whole.
func maskOne(m string) string {
	i := 0
	if m != "" && m[0] == '\\' {
		i = charLen(m)
	}
	for n := 0; n < keep && i < len(m); n++ {
		i += charLen(m[i:])
	}
	return m[:i] + mask
}

// charLen is the length in bytes of the first character of s, a JSON
// escape counting as one.
func charLen(s string) int {
	if s[0] == '\\' && len(s) >= 6 && s[1] == 'u' {
		return 6
	}
	if s[0] == '\\' && len(s) >= 2 {
		return 2
	}
	return 1
}
