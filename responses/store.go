// Package responses owns the response store of the Responses API
// (SPEC 10.1): what a stored turn keeps (its own input items, its output,
// the response object, the session it was served under and a link to the
// turn before it), scoped by team, with store_ttl, bounded in bytes, in
// Redis when configured (any replica finds a conversation) or in a bounded
// local store otherwise.
//
// A turn never copies the conversation it continues: a follow-up is read
// by walking the links back from previous_response_id (Load), bounded by a
// byte budget and a depth, so a conversation of N turns stores O(N) bytes.
// Items are found by the gateway's own output item ids, which name the
// response that produced them (ItemResponse), so a client-chosen id can
// never shadow another item and deleting a response removes exactly its
// own record.
//
// A request reads what it continues with one bounded call (Load: the chain
// and every referenced item in one round trip at most); storing is a
// non-blocking hand-off after the response (Save), written by one
// background goroutine. It imports wire for the item type and go-redis;
// never gin or the gateway.
package responses

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"switchyard/wire"
)

// Record is one stored turn.
type Record struct {
	ID string `json:"id"`
	// Session is the session key the conversation's first response was
	// served under; follow-ups reuse it so tier and deployment pins follow
	// the conversation across replicas (SPEC 8).
	Session string `json:"session,omitempty"`
	// Prev is the id of the turn this one continues (its
	// previous_response_id); "" for a conversation's first turn. Only the
	// link is kept, never a copy of the earlier turns.
	Prev string `json:"prev,omitempty"`
	// Input is this request's own input items, item_references resolved.
	Input []wire.Item `json:"input,omitempty"`
	// Output is this response's output items; item_reference finds them
	// by the ids the gateway gave them.
	Output []wire.Item `json:"output,omitempty"`
	// Response is the response object as returned to the client (GET).
	// Load leaves it empty in the chain it returns.
	Response json.RawMessage `json:"response,omitempty"`
}

// Items is the turn's part of the conversation: its input, then its output.
func (r *Record) Items() []wire.Item {
	out := make([]wire.Item, 0, len(r.Input)+len(r.Output))
	return append(append(out, r.Input...), r.Output...)
}

// ItemsSize is the bytes the turn adds to an expanded request (wire.Item.Size).
func (r *Record) ItemsSize() int64 {
	var n int64
	for i := range r.Input {
		n += int64(r.Input[i].Size())
	}
	for i := range r.Output {
		n += int64(r.Output[i].Size())
	}
	return n
}

// item is the output item with id, if the turn has it.
func (r *Record) item(id string) (wire.Item, bool) {
	for i := range r.Output {
		if r.Output[i].ID == id {
			return r.Output[i], true
		}
	}
	return wire.Item{}, false
}

// ItemResponse names the response an output item id belongs to: the
// gateway's output item ids are msg_<hex>_<n> and fc_<hex>_<n> for response
// resp_<hex> (providers.itemID). Anything else (a client's own id) is not a
// stored item; false.
func ItemResponse(itemID string) (string, bool) {
	rest, ok := strings.CutPrefix(itemID, "msg_")
	if !ok {
		if rest, ok = strings.CutPrefix(itemID, "fc_"); !ok {
			return "", false
		}
	}
	i := strings.LastIndexByte(rest, '_')
	if i < 1 {
		return "", false
	}
	if _, err := strconv.ParseUint(rest[i+1:], 10, 32); err != nil {
		return "", false
	}
	return "resp_" + rest[:i], true
}

// Budget bounds what Load reads (SPEC 10.1, 14).
type Budget struct {
	// Bytes is what the earlier turns may add to the request (wire.Item.Size
	// summed over their items). Past it Load stops with ErrTooLarge before
	// reading further (Redis's walk counts the stored JSON, so it reads at
	// most about twice Bytes before the exact count).
	Bytes int64
	// Depth is the most turns the walk follows (at least 1).
	Depth int
}

// Lookup is what Load found.
type Lookup struct {
	// Chain is the conversation previous_response_id names, oldest turn
	// first, its last element the previous response; empty when none was
	// asked. Its records carry no Response.
	Chain []*Record
	// Items are the referenced items found, by id.
	Items map[string]wire.Item
}

// ErrNotFound is an unknown, expired, evicted, deleted or other team's
// response. Load wraps it in a *MissingError naming the turn not found.
var ErrNotFound = errors.New("response not found")

// ErrUnavailable is a shared store that could not be read in time.
var ErrUnavailable = errors.New("response store unavailable")

// ErrTooLarge is a conversation whose earlier turns exceed Budget.Bytes.
var ErrTooLarge = errors.New("stored conversation larger than the budget")

// ErrTooDeep is a conversation of more turns than Budget.Depth.
var ErrTooDeep = errors.New("stored conversation longer than the budget")

// MissingError is a turn of the chain that is not stored (any more): the
// previous response itself, or an earlier turn it links to that expired or
// was evicted before it.
type MissingError struct{ ID string }

func (e *MissingError) Error() string { return "response " + e.ID + " not found" }

// Is makes a MissingError an ErrNotFound.
func (e *MissingError) Is(target error) bool { return target == ErrNotFound }

// Store keeps stored responses per team.
type Store interface {
	// Load reads, in one round trip at most, the chain of turns ending at
	// prev (when not "") and the output items named by refs, all of team,
	// within b. An unknown turn anywhere in the chain is a *MissingError;
	// referenced items that are unknown are absent from Lookup.Items.
	Load(ctx context.Context, team, prev string, refs []string, b Budget) (Lookup, error)
	// Save stores rec for team. It never blocks on I/O.
	Save(team string, rec *Record)
	// Get returns a stored response (with its Response) or ErrNotFound.
	Get(ctx context.Context, team, id string) (*Record, error)
	// Input returns a stored response's own input items (its request's
	// items, item_references resolved; never the earlier turns'), in
	// order, or ErrNotFound: GET /v1/responses/{id}/input_items.
	Input(ctx context.Context, team, id string) ([]wire.Item, error)
	// Delete removes a stored response's own record (its input and output;
	// never another turn's); false when unknown.
	Delete(ctx context.Context, team, id string) (bool, error)
	// Close writes what is pending, until ctx ends.
	Close(ctx context.Context) error
}

// Config is the store's part of the configuration (responses.*).
type Config struct {
	TTL           time.Duration // store_ttl
	MaxLocal      int           // max_local: responses kept by the local store
	MaxLocalBytes int64         // max_local_bytes: bytes kept by the local store
	MaxTeamBytes  int64         // max_team_bytes: bytes one team may keep in Redis
}

// recordOverhead is what a record costs beyond its strings (map entry,
// list element, struct, slice headers), counted so that many tiny records
// are bounded by bytes too.
const recordOverhead = 256

// itemOverhead is the same for each item (the wire.Item struct).
const itemOverhead = 160

// partOverhead is the same for each content part (the wire.Part struct).
const partOverhead = 64
