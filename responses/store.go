// Package responses owns the response store of the Responses API
// (SPEC 10.1): what a stored response keeps (the whole conversation up to
// and including its output, the response object, the session it was served
// under), scoped by team, with store_ttl, in Redis when configured (any
// replica finds a conversation) or in a bounded local store otherwise.
//
// A request reads the stored conversation it continues with one bounded call
// (Load: the previous response and every referenced item in one round trip);
// storing is a non-blocking hand-off after the response (Save), written by
// one background goroutine. It imports wire for the item type and go-redis;
// never gin or the gateway.
package responses

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"switchyard/wire"
)

// Record is one stored response.
type Record struct {
	ID string `json:"id"`
	// Session is the session key the conversation's first response was
	// served under; follow-ups reuse it so tier and deployment pins follow
	// the conversation across replicas (SPEC 8).
	Session string `json:"session,omitempty"`
	// Items is the conversation in order: the earlier turns, this request's
	// input (references resolved) and this response's output items.
	Items []wire.Item `json:"items"`
	// Response is the response object as returned to the client (GET).
	Response json.RawMessage `json:"response"`
	// First is the index in Items of the first item this turn added; items
	// from there on that carry an id are indexed for item_reference, and
	// only those go when the response is deleted (earlier turns' items
	// belong to earlier responses). Stored, so a Delete on another node
	// removes the same items.
	First int `json:"first,omitempty"`
}

// Lookup is what Load found.
type Lookup struct {
	Previous *Record              // the previous response; nil when none was asked
	Items    map[string]wire.Item // referenced items found, by id
}

// ErrNotFound is an unknown, expired, deleted or other team's response.
var ErrNotFound = errors.New("response not found")

// ErrUnavailable is a shared store that could not be read in time.
var ErrUnavailable = errors.New("response store unavailable")

// Store keeps stored responses per team.
type Store interface {
	// Load reads, in one round trip at most, the response prev (when not
	// "") and the items named by refs, all of team. It returns ErrNotFound
	// when prev is unknown; referenced items that are unknown are absent
	// from Lookup.Items.
	Load(ctx context.Context, team, prev string, refs []string) (Lookup, error)
	// Save stores rec for team. It never blocks on I/O.
	Save(team string, rec *Record)
	// Get returns a stored response or ErrNotFound.
	Get(ctx context.Context, team, id string) (*Record, error)
	// Delete removes a stored response and its items; false when unknown.
	Delete(ctx context.Context, team, id string) (bool, error)
	// Close writes what is pending, until ctx ends.
	Close(ctx context.Context) error
}

// Config is the store's part of the configuration (responses.*).
type Config struct {
	TTL      time.Duration // store_ttl
	MaxLocal int           // max_local: responses kept by the local store
}
