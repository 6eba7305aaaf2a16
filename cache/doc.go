// Package cache owns the response cache of SPEC 18 apart from its Redis
// round trip: the canonical key of a request (canon.go, key.go,
// key_anthropic.go, key_responses.go), the canonical entry of an answer and
// its compact encoding (entry.go), building an entry from a complete
// upstream answer, sync or streamed, in any client format (build.go,
// accumulate.go), replaying an entry in any client format and mode
// (replay.go, through the providers package's own encoders), the node's
// bounded LRU store (local.go), the Cache-Control request directives
// (directives.go), the per-model and per-team switches (policy.go) and
// coalescing identical requests on one node (coalesce.go).
//
// It imports catalog (Operation), wire (Format, Request), providers (the
// encoders the live path uses) and config; never gin or redis: the edge
// state reads and writes entries in Redis as the bytes Entry.Encode makes.
package cache
