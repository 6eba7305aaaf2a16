package gateway

// The Responses API (SPEC 10.1) and the smaller endpoints real clients call
// (SPEC 10): POST /v1/responses runs the chat pipeline with the Responses
// format (same auth, limits, tiers, routing, failover, headers, audit); its
// one extra stage, conversation, expands previous_response_id and
// item_reference items from the response store before the edge limit, so
// the token estimate and the tier classifier see the whole conversation.
// The finished response is handed to the store without waiting on it.

import (
	"bytes"
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
	// seq is the next sequence_number of the stream relayed to the client:
	// one past the last event written (relayed), so the error event that
	// may end the stream continues the sequence (SPEC 10.1). Only the
	// request's goroutine touches it.
	seq int64
}

// seqKey is what precedes an event's sequence_number. In a JSON string a
// quote is escaped, so no text the model wrote can contain it.
var seqKey = []byte(`"sequence_number":`)

// relayed notes the framed Responses events ev that reached the client
// (a no-op for other formats, whose rs is nil). Each event's
// sequence_number is its last key, so the last one in ev is found from
// the end, in a few bytes for a text delta.
func (rs *responsesCall) relayed(ev []byte) {
	if rs == nil {
		return
	}
	i := bytes.LastIndex(ev, seqKey)
	if i < 0 {
		return
	}
	var n int64
	digits := 0
	for _, c := range ev[i+len(seqKey):] {
		if c < '0' || c > '9' || digits == 18 {
			break
		}
		n = n*10 + int64(c-'0')
		digits++
	}
	if digits > 0 {
		rs.seq = n + 1
	}
}

// streamError is e as the event that ends the client's stream after its
// first byte, in its format; on a Responses stream it continues the
// sequence of the events relayed.
func (cl *call) streamError(e *apiError) []byte {
	var seq int64
	if cl.rs != nil {
		seq = cl.rs.seq
	}
	return e.streamEvent(cl.format, seq)
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

// handleInputItems is GET /v1/responses/{id}/input_items (OpenAI's "List
// input items", which the SDKs call as responses.inputItems.list): the
// stored response's input items, paged by after/before (an item id),
// limit (1-100, default 20) and order (asc or desc, default desc); include
// is accepted and ignored (the items carry everything they have). Auth and
// team scoping are GET's: another team's, an unknown or an expired id is
// 404.
//
// The list holds this request's own input items only (item_references
// resolved), not the conversation that previous_response_id continued:
// the store keeps each turn's own items linked to the turn before (SPEC
// 10.1), so a page is one bounded read of one record, and the earlier
// turns are listed under their own response ids. Instructions are not an
// item (the response object echoes them).
func (s *Server) handleInputItems(c *gin.Context) {
	team, _ := s.teamOf(c, wire.FormatOpenAI)
	if team == nil {
		return
	}
	q := c.Request.URL.Query()
	limit := 20
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > 100 {
			writeError(c, errBadRequest("limit", "limit must be an integer from 1 to 100"))
			return
		}
		limit = n
	}
	desc := true
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		desc = false
	default:
		writeError(c, errBadRequest("order", "order must be \"asc\" or \"desc\""))
		return
	}
	id := c.Param("id")
	items, err := s.Responses.Input(c.Request.Context(), team.Name, id)
	if err != nil {
		writeError(c, storeError(err, id))
		return
	}
	ids := inputItemIDs(id, items)
	order := make([]int, len(items)) // positions in the listing's order
	for i := range order {
		order[i] = i
		if desc {
			order[i] = len(items) - 1 - i
		}
	}
	at := func(param, cursor string) (int, bool) {
		for k, i := range order {
			if ids[i] == cursor {
				return k, true
			}
		}
		writeError(c, errBadRequest(param, "no input item of response '"+id+"' has the id '"+cursor+"'"))
		return 0, false
	}
	lo, hi := 0, len(order) // the window the cursors leave, in listing order
	if a := q.Get("after"); a != "" {
		k, ok := at("after", a)
		if !ok {
			return
		}
		lo = k + 1
	}
	if b := q.Get("before"); b != "" {
		k, ok := at("before", b)
		if !ok {
			return
		}
		hi = min(hi, k)
	}
	lo = min(lo, hi)
	page := order[lo:hi]
	more := len(page) > limit
	if more {
		if q.Get("before") != "" && q.Get("after") == "" {
			page = page[len(page)-limit:] // the items right before the cursor
		} else {
			page = page[:limit]
		}
	}
	list := inputItemList{Object: "list", Data: make([]any, 0, len(page)), HasMore: more}
	for _, i := range page {
		list.Data = append(list.Data, inputItemView(ids[i], &items[i]))
	}
	if len(page) > 0 {
		first, last := ids[page[0]], ids[page[len(page)-1]]
		list.FirstID, list.LastID = &first, &last
	}
	c.JSON(http.StatusOK, list)
}

// inputItemList is the list object of GET /v1/responses/{id}/input_items.
type inputItemList struct {
	Object  string  `json:"object"`
	Data    []any   `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// inputItemIDs gives every input item of response respID an id: its own
// when it came with one (the first item to carry it), else one derived
// from the response id and the item's position, never random, so a page's
// last id names the same item in every call and on every replica (the
// SDKs page with after=<last id>). A derived id holds this response's id,
// which no client knew when it sent the items, so it never equals one of
// theirs, and its "_in" position is not an output item's number, so it
// never names an output item (responses.ItemResponse).
func inputItemIDs(respID string, items []wire.Item) []string {
	base := strings.TrimPrefix(respID, "resp_")
	ids := make([]string, len(items))
	seen := make(map[string]bool, len(items))
	for i := range items {
		own := items[i].ID
		if own != "" && !seen[own] {
			ids[i] = own
			seen[own] = true
			continue
		}
		prefix := "msg_"
		switch items[i].Type {
		case "function_call":
			prefix = "fc_"
		case "function_call_output":
			prefix = "fco_"
		}
		ids[i] = prefix + base + "_in" + strconv.Itoa(i)
	}
	return ids
}

// inputMessage is a message input item as the Responses API lists it
// (a user, system or developer message; an assistant message takes the
// output message's shape, content parts output_text and refusal).
type inputMessage struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content []any  `json:"content"`
	Status  string `json:"status"`
}

type inputFunctionCall struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

type inputFunctionOutput struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output string `json:"output"`
	Status string `json:"status"`
}

type inputText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type outputText struct {
	Type        string            `json:"type"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []json.RawMessage `json:"logprobs"`
	Text        string            `json:"text"`
}

type inputImage struct {
	Type     string `json:"type"`
	ImageURL string `json:"image_url"`
	Detail   string `json:"detail"`
}

type refusalPart struct {
	Type    string `json:"type"`
	Refusal string `json:"refusal"`
}

// inputItemView is a stored input item in the shape the Responses API
// lists items in, under id; an item stored without a status is listed
// "completed" (it was used, whole, to generate the response).
func inputItemView(id string, it *wire.Item) any {
	status := it.Status
	if status == "" {
		status = "completed"
	}
	switch it.Type {
	case "function_call":
		return inputFunctionCall{ID: id, Type: it.Type, CallID: it.CallID, Name: it.Name, Arguments: it.Arguments, Status: status}
	case "function_call_output":
		return inputFunctionOutput{ID: id, Type: it.Type, CallID: it.CallID, Output: it.Output, Status: status}
	}
	content := make([]any, 0, len(it.Content))
	for _, p := range it.Content {
		switch p.Type {
		case "output_text":
			content = append(content, outputText{Type: p.Type, Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}, Text: p.Text})
		case "refusal":
			content = append(content, refusalPart{Type: p.Type, Refusal: p.Text})
		case "input_image":
			detail := p.Detail
			if detail == "" {
				detail = "auto"
			}
			content = append(content, inputImage{Type: p.Type, ImageURL: p.ImageURL, Detail: detail})
		default:
			content = append(content, inputText{Type: p.Type, Text: p.Text})
		}
	}
	return inputMessage{ID: id, Type: "message", Role: it.Role, Content: content, Status: status}
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
