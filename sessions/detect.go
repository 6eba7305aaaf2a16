// Package sessions owns session detection and the session pins of SPEC 8:
// which conversation a request belongs to, and the stores that keep a
// session's tier pin (SPEC 4) and deployment pin (SPEC 5, 8) with their
// inactivity TTLs. Local is the node-local store; the shared pins live in
// Redis under the team's keys, read and written by package edge (one round
// trip with the admission, one background writer).
//
// sessions imports wire for the parsed request and xxhash for stable keys,
// and nothing of the HTTP edge: never gin, never the gateway or routing. Keys it produces carry
// no credential and are bounded in length, so they are safe as Redis keys
// but are still never metric labels (CONVENTIONS 14).
package sessions

import (
	"net/http"
	"strings"

	"github.com/cespare/xxhash/v2"

	"switchyard/wire"
)

// Session sources reported by Detect.
const (
	SourceFingerprint = "fingerprint"
)

// sessionHeaders are the request headers that name a session, in
// precedence order, with the source Detect reports for each. They are the
// generic names first, then the ones coding agents send:
// X-Claude-Code-Session-Id (Claude Code), session_id and conversation_id
// (Codex CLI, canonicalised by net/http as Session_id and Conversation_id),
// X-Codex-*, X-Qwen-Code-Session-Id (Qwen Code), then conversation and
// thread ids. Credential headers (Authorization, X-Api-Key, Cookie, ...) are
// not in this list and are never read.
var sessionHeaders = [...]struct{ name, source string }{
	{"X-Session-Id", "header:x-session-id"},
	{"X-Claude-Code-Session-Id", "header:x-claude-code-session-id"},
	{"Session-Id", "header:session-id"},
	{"Session_id", "header:session_id"},
	{"Agent-Session-Id", "header:agent-session-id"},
	{"X-Codex-Session-Id", "header:x-codex-session-id"},
	{"X-Qwen-Code-Session-Id", "header:x-qwen-code-session-id"},
	{"X-Conversation-Id", "header:x-conversation-id"},
	{"Conversation-Id", "header:conversation-id"},
	{"Conversation_id", "header:conversation_id"},
	{"X-Codex-Conversation-Id", "header:x-codex-conversation-id"},
	{"X-Thread-Id", "header:x-thread-id"},
	{"Thread-Id", "header:thread-id"},
}

// Detect returns the session key of a request and where it came from
// (SPEC 8). First match wins:
//
//  1. a session header (see sessionHeaders), source "header:<name>";
//  2. a body field: prompt_cache_key, session_id, metadata.session_id,
//     Anthropic metadata.user_id, the Responses conversation; source
//     "body:<field>";
//  3. a fingerprint of the part of a conversation every later turn resends:
//     the requested model, the system prompt, the tools as sent and the
//     messages up to and including the first user message; source
//     "fingerprint".
//
// Values are trimmed; an empty value does not match. The key is scoped by
// team: "<team>:id:<hash>" for an explicit id (the same id from a header or
// a body field is the same session) and "<team>:fp:<hash>" for a
// fingerprint, where hash is 16 hex digits of xxHash64 (stable across
// processes and replicas, and fixed-length whatever the client sends).
// A request with no explicit id and no messages (embeddings, images) has no
// session: Detect returns "", "".
func Detect(team string, h http.Header, r *wire.Request) (key string, source string) {
	for _, sh := range sessionHeaders {
		if v := headerValue(h, sh.name); v != "" {
			return idKey(team, v), sh.source
		}
	}
	if r == nil {
		return "", ""
	}
	for _, f := range [...]struct{ value, source string }{
		{r.PromptCacheKey, "body:prompt_cache_key"},
		{r.SessionID, "body:session_id"},
		{r.MetadataSessionID, "body:metadata.session_id"},
		{r.MetadataUserID, "body:metadata.user_id"},
		{r.Conversation, "body:conversation"},
	} {
		if v := strings.TrimSpace(f.value); v != "" {
			return idKey(team, v), f.source
		}
	}
	if len(r.Messages) == 0 {
		return "", ""
	}
	return makeKey(team, "fp", Fingerprint(r)), SourceFingerprint
}

// headerValue is h.Get(name) trimmed, for a name already in canonical form
// (so no canonicalisation allocates).
func headerValue(h http.Header, name string) string {
	if vs := h[name]; len(vs) > 0 {
		return strings.TrimSpace(vs[0])
	}
	return ""
}

func idKey(team, id string) string { return makeKey(team, "id", xxhash.Sum64String(id)) }

// makeKey builds "<team>:<kind>:<16 hex digits>" in one allocation.
func makeKey(team, kind string, sum uint64) string {
	const hexDigits = "0123456789abcdef"
	var sb strings.Builder
	sb.Grow(len(team) + len(kind) + 18)
	sb.WriteString(team)
	sb.WriteByte(':')
	sb.WriteString(kind)
	sb.WriteByte(':')
	for shift := 60; shift >= 0; shift -= 4 {
		sb.WriteByte(hexDigits[sum>>uint(shift)&0xf])
	}
	return sb.String()
}

// Fingerprint hashes what every turn of a conversation resends: the
// requested model, the tools as sent, the system prompt and the messages up
// to and including the first user message (system and developer messages
// among them; for Anthropic, the top-level system). It reads nothing after
// the first user message, so turn 1 and turn 50 of a conversation hash the
// same, and a system message injected later does not move the session. Each
// field is length-prefixed so field boundaries cannot be forged.
// The team is not part of the hash; Detect scopes the key by team.
func Fingerprint(r *wire.Request) uint64 {
	var d xxhash.Digest
	d.Reset()
	length := func(l int) {
		var n [8]byte
		for i := range n {
			n[i] = byte(uint64(l) >> (8 * i))
		}
		_, _ = d.Write(n[:])
	}
	field := func(s string) {
		length(len(s))
		_, _ = d.WriteString(s)
	}
	field(r.Model)
	length(len(r.ToolsRaw))
	_, _ = d.Write(r.ToolsRaw)
	if r.Format != wire.FormatOpenAI { // Anthropic system, Responses instructions
		field(r.System)
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		field(m.Role)
		field(m.Text)
		if m.Role == "user" {
			break
		}
	}
	return d.Sum64()
}
