package gateway

// The Responses API (SPEC 10.1) and the smaller endpoints real clients call
// (SPEC 10): POST /v1/responses runs the chat pipeline with the Responses
// format (same auth, limits, tiers, routing, failover, headers, audit); its
// one extra stage, conversation, expands previous_response_id and
// item_reference items from the response store before the edge limit, so
// the token estimate and the tier classifier see the whole conversation.
// The finished response is handed to the store without waiting on it.

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"switchyard/catalog"
	"switchyard/providers"
	"switchyard/responses"
	"switchyard/sessions"
	"switchyard/wire"
)

// sessionSourceConversation is the audit's session source for a follow-up
// that inherited its conversation's session.
const sessionSourceConversation = "responses:previous_response_id"

// responsesCall is the Responses part of a call.
type responsesCall struct {
	cl      *call
	first   int    // index in the expanded input of this request's first item
	session string // the conversation's session key from the store; "" for a first turn
}

func (s *Server) handleResponses(c *gin.Context) {
	s.serve(c, catalog.OpChat, wire.FormatResponses)
}

// conversation gives the request its response id and, when it continues a
// stored conversation, replaces its input with the stored turns plus its
// own items (references resolved), in one bounded store read. What the
// expansion adds is counted before anything is built: past
// server.max_body_bytes it is a 413 (SPEC 10.1, 14), so a few bytes of
// references can never make the node hold more than the body limit.
func (cl *call) conversation() bool {
	rq := cl.req.Responses
	if rq == nil {
		return true
	}
	rq.ID = providers.NewResponseID()
	cl.rs = &responsesCall{cl: cl}
	if rq.PreviousResponseID == "" && len(rq.Refs) == 0 {
		return true
	}
	srv := cl.s.cfg().Server
	maxItems := srv.MaxMessages
	if maxItems < 1 {
		maxItems = wire.DefaultMaxMessages
	}
	// what the stored turns and references may add: the body limit less
	// the body itself (a reference's own bytes are not subtracted back)
	room := srv.MaxBodyBytes - int64(len(cl.req.Raw))
	lk, err := cl.s.Responses.Load(cl.ctx, cl.team.Name, rq.PreviousResponseID, rq.Refs, responses.Budget{Bytes: room, Depth: maxItems})
	var missing *responses.MissingError
	switch {
	case errors.As(err, &missing):
		return cl.fail(errTurnNotFound(rq.PreviousResponseID, missing.ID))
	case errors.Is(err, responses.ErrNotFound):
		return cl.fail(errResponseNotFound(rq.PreviousResponseID, "previous_response_id", "previous_response_not_found"))
	case errors.Is(err, responses.ErrTooLarge):
		return cl.fail(errExpandedTooLarge(srv.MaxBodyBytes, "previous_response_id"))
	case errors.Is(err, responses.ErrTooDeep):
		return cl.fail(errBadRequest("previous_response_id", "the conversation has more than "+strconv.Itoa(maxItems)+" stored turns (server.max_messages): start a new conversation"))
	case err != nil:
		return cl.fail(&apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "response_store_unavailable", Param: "previous_response_id",
			Message: "the response store could not be read in time; retry, or send the conversation without previous_response_id"})
	}
	// count, then build: the sizes and the item count of everything the
	// expansion adds, stopping at the first byte past the limit
	var added int64
	n := len(rq.Input)
	for _, t := range lk.Chain {
		if added += t.ItemsSize(); added > room {
			return cl.fail(errExpandedTooLarge(srv.MaxBodyBytes, "previous_response_id"))
		}
		n += len(t.Input) + len(t.Output)
	}
	for i := range rq.Input {
		it := &rq.Input[i]
		if it.Type != "item_reference" {
			continue
		}
		ref, ok := lk.Items[it.ID]
		if !ok {
			return cl.fail(&apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "item_not_found",
				Param: "input[" + strconv.Itoa(i) + "].id", Message: "Item with id '" + it.ID + "' not found: it is unknown, expired, or stored with store: false"})
		}
		if added += int64(ref.Size()); added > room {
			return cl.fail(errExpandedTooLarge(srv.MaxBodyBytes, "input["+strconv.Itoa(i)+"].id"))
		}
	}
	if n > maxItems {
		return cl.fail(errBadRequest("previous_response_id", "the conversation has "+strconv.Itoa(n)+" items with the stored turns; at most "+strconv.Itoa(maxItems)+" are allowed (server.max_messages): start a new conversation"))
	}
	// the expansion is request body the node holds: it takes its bytes from
	// the node's body budget like the body's own growth (SPEC 14), or many
	// small follow-ups would each hold up to the body limit beyond it
	if added > 0 && !cl.body.grow(added) {
		return cl.fail(cl.s.bodyBudgetExhausted(cl.body.size))
	}
	items := make([]wire.Item, 0, n)
	for _, t := range lk.Chain {
		items = append(append(items, t.Input...), t.Output...)
	}
	if len(lk.Chain) > 0 {
		cl.rs.session = lk.Chain[len(lk.Chain)-1].Session
	}
	cl.rs.first = len(items)
	for _, it := range rq.Input {
		if it.Type == "item_reference" {
			it = lk.Items[it.ID]
		}
		items = append(items, it)
	}
	if err := cl.req.ExpandResponses(items, wire.Limits{MaxMessages: maxItems}); err != nil {
		return cl.fail(fromInputError(err))
	}
	cl.promptTokens = cl.req.PromptTokens()
	if cl.rs.session != "" {
		// a header or an explicit body id still wins (SPEC 8); otherwise the
		// follow-up is the conversation's session, not a new fingerprint
		key, src := sessions.Detect(cl.team.Name, cl.c.Request.Header, cl.req)
		if src == "" || src == sessions.SourceFingerprint {
			key, src = cl.rs.session, sessionSourceConversation
		}
		cl.session, cl.sessionSrc = key, src
		cl.entry.Session = src
	}
	return true
}

// responsesDone is the providers.Request hook that receives the final
// response object of the served attempt (SPEC 10.1): the record is handed
// to the store then, just before the answer's last bytes reach the client,
// so a client's immediate follow-up on this node finds it, and the shared
// write (asynchronous, by the store's writer) starts as early as it can.
// The record holds this turn's own items and a link to the turn before,
// never a copy of the conversation.
func (rs *responsesCall) responsesDone(body []byte, output []wire.Item) {
	cl := rs.cl
	rq := cl.req.Responses
	if !rq.Store {
		return
	}
	session := rs.session
	if session == "" {
		session = cl.sessionKey()
	}
	// a copy of this turn's items: a subslice would keep the expanded
	// conversation's whole array alive in the store
	input := append([]wire.Item(nil), rq.Input[rs.first:]...)
	cl.s.Responses.Save(cl.team.Name, &responses.Record{ID: rq.ID, Session: session, Prev: rq.PreviousResponseID,
		Input: input, Output: output, Response: body})
}

// errExpandedTooLarge is a request whose stored turns or referenced items
// would take it past server.max_body_bytes (SPEC 10.1).
func errExpandedTooLarge(limit int64, param string) *apiError {
	e := errTooLarge(limit)
	e.Param = param
	e.Message = "the request with its stored turns and referenced items is larger than server.max_body_bytes (" +
		strconv.FormatInt(limit, 10) + " bytes): start a new conversation or reference fewer items"
	return e
}

// errTurnNotFound is a chain with a turn gone: the previous response
// itself, or an earlier turn it links to that expired or was evicted
// first (turns are stored linked, each for its own store_ttl).
func errTurnNotFound(prev, missing string) *apiError {
	if missing == prev {
		return errResponseNotFound(prev, "previous_response_id", "previous_response_not_found")
	}
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "previous_response_not_found", Param: "previous_response_id",
		Message: "Response with id '" + missing + "', an earlier turn of the conversation '" + prev + "' continues, not found: it expired, was evicted or deleted; send the conversation in full without previous_response_id"}
}

func errResponseNotFound(id, param, code string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: code, Param: param,
		Message: "Response with id '" + id + "' not found: it is unknown, expired, deleted, or belongs to another team"}
}

// teamOf authenticates a request outside the pipeline, answering 401 in
// format when the key is missing or unknown. It returns the team and the
// key's record, from one snapshot (the key's models narrow the team's,
// SPEC 3.1).
func (s *Server) teamOf(c *gin.Context, format wire.Format) (*catalog.Team, *catalog.KeyInfo) {
	id := s.newRequestID(c.Request)
	c.Header("X-Request-Id", id)
	c.Header("Request-Id", id)
	team, key := s.Catalog.Load().AuthenticateKey(apiKey(c.Request), time.Now())
	if team == nil {
		writeErrorFormat(c, errNoKeyOr(c.Request), format)
	}
	return team, key
}

// handleGetResponse is GET /v1/responses/{id}: the stored response object.
func (s *Server) handleGetResponse(c *gin.Context) {
	team, _ := s.teamOf(c, wire.FormatOpenAI)
	if team == nil {
		return
	}
	id := c.Param("id")
	rec, err := s.Responses.Get(c.Request.Context(), team.Name, id)
	if err != nil {
		writeError(c, storeError(err, id))
		return
	}
	c.Data(http.StatusOK, "application/json", rec.Response)
}

// handleDeleteResponse is DELETE /v1/responses/{id}.
func (s *Server) handleDeleteResponse(c *gin.Context) {
	team, _ := s.teamOf(c, wire.FormatOpenAI)
	if team == nil {
		return
	}
	id := c.Param("id")
	ok, err := s.Responses.Delete(c.Request.Context(), team.Name, id)
	if err == nil && !ok {
		err = responses.ErrNotFound
	}
	if err != nil {
		writeError(c, storeError(err, id))
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": id, "object": "response", "deleted": true})
}

func storeError(err error, id string) *apiError {
	if errors.Is(err, responses.ErrNotFound) {
		return errResponseNotFound(id, "response_id", "response_not_found")
	}
	return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "response_store_unavailable",
		Message: "the response store could not be read in time; retry"}
}

// handleModel is GET /v1/models/{id}: the model when the team may call it,
// else 404 (a restricted team cannot probe which models exist).
func (s *Server) handleModel(c *gin.Context) {
	team, key := s.teamOf(c, wire.FormatOpenAI)
	if team == nil {
		return
	}
	id := strings.TrimPrefix(c.Param("id"), "/")
	snap := s.Catalog.Load()
	owner := ""
	if m := snap.Models[id]; m != nil && hasEnabled(m) {
		owner = "switchyard"
	} else if snap.Routes[id] != nil {
		owner = "switchyard-tier-route"
	}
	if owner == "" || !team.Allows(id) || !key.Allows(id) {
		writeError(c, errModelNotFound(id))
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": id, "object": "model", "created": 0, "owned_by": owner})
}

// handleCountTokens is POST /v1/messages/count_tokens: the gateway's own
// prompt estimate (SPEC 3), in the Anthropic shape, errors included.
func (s *Server) handleCountTokens(c *gin.Context) {
	team, key := s.teamOf(c, wire.FormatAnthropic)
	if team == nil {
		return
	}
	var lease bodyLease
	defer lease.release()
	var end time.Time // the request's deadline, as the pipeline's
	if rt := s.cfg().Server.RequestTimeout; rt > 0 {
		end = time.Now().Add(rt)
	}
	body, e := s.readBody(c, &lease, end)
	if e != nil {
		writeErrorFormat(c, e, wire.FormatAnthropic)
		return
	}
	if json.Valid(body) {
		if _, _, ok := wire.FindTopLevel(body, "max_tokens"); !ok {
			body = wire.SetTopLevel(body, "max_tokens", []byte("1")) // count_tokens takes none
		}
	}
	req, err := wire.ParseLimited(body, catalog.OpChat, wire.FormatAnthropic, s.shapeLimits())
	if err != nil {
		writeErrorFormat(c, fromInputError(err), wire.FormatAnthropic)
		return
	}
	if !team.Allows(req.Model) || !key.Allows(req.Model) { // the key narrows the team (SPEC 3.1)
		writeErrorFormat(c, errNotAllowed(req.Model), wire.FormatAnthropic)
		return
	}
	c.JSON(http.StatusOK, gin.H{"input_tokens": req.PromptTokens()})
}
