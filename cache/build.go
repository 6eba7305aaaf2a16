package cache

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"switchyard/catalog"
	"switchyard/internal/jsonspan"
	"switchyard/wire"
)

// Meta is what the gateway knows about an answer beyond its body: who
// served it and when.
type Meta struct {
	Tier       string // the tier a tier alias resolved to, else ""
	Model      string // the public model that served it
	Deployment string // the deployment id
	Now        time.Time
}

// ErrNotStorable is returned for an answer that must not be stored (SPEC
// 18): not complete, not successful, a finish reason other than stop,
// length or tool calls, n > 1, or content the entry cannot replay (a
// refusal, thinking blocks).
var ErrNotStorable = errors.New("cache: answer is not storable")

func notStorable(why string) error { return fmt.Errorf("%w: %s", ErrNotStorable, why) }

// FromBody builds an entry from a complete sync answer (status 200) in the
// client's format. The caller checks the status and that the answer was not
// degraded (served by a fallback model).
func FromBody(op catalog.Operation, format wire.Format, body []byte, m Meta) (*Entry, error) {
	var e *Entry
	var err error
	switch {
	case op == catalog.OpEmbeddings:
		e, err = embeddingsEntry(body)
	case op != catalog.OpChat:
		return nil, notStorable("operation " + op.String())
	case format == wire.FormatOpenAI:
		e, err = openAIEntry(body)
	case format == wire.FormatAnthropic:
		e, err = anthropicEntry(body)
	case format == wire.FormatResponses:
		e, err = responsesEntry(body)
	default:
		return nil, notStorable("unknown format")
	}
	if err != nil {
		return nil, err
	}
	e.setMeta(m)
	return e, nil
}

func (e *Entry) setMeta(m Meta) {
	e.Tier, e.Model, e.Deployment = m.Tier, m.Model, m.Deployment
	e.StoredAt = m.Now.Truncate(time.Millisecond)
}

type oaUsageIn struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *oaUsageIn) usage() Usage {
	if u == nil {
		return Usage{}
	}
	out := Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		out.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	return out
}

func openAIEntry(body []byte) (*Entry, error) {
	if e, ok := openAIEntryFast(body); ok {
		return e, e.checkFinish()
	}
	return openAIEntrySlow(body)
}

// openAIEntrySlow reads any sync OpenAI chat answer with encoding/json.
func openAIEntrySlow(body []byte) (*Entry, error) {
	var r struct {
		Choices []struct {
			Message struct {
				Content     *string         `json:"content"`
				Refusal     *string         `json:"refusal"`
				ToolCalls   []oaCallIn      `json:"tool_calls"`
				Audio       json.RawMessage `json:"audio"`
				Annotations json.RawMessage `json:"annotations"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *oaUsageIn `json:"usage"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, notStorable("body: " + err.Error())
	}
	if len(r.Choices) != 1 {
		return nil, notStorable("not exactly one choice")
	}
	c := r.Choices[0]
	if c.Message.Refusal != nil && *c.Message.Refusal != "" {
		return nil, notStorable("refusal")
	}
	if !isNull(c.Message.Audio) {
		return nil, notStorable("audio output")
	}
	if a := bytes.TrimSpace(c.Message.Annotations); !isNull(a) && string(a) != "[]" {
		return nil, notStorable("annotations") // citations the entry cannot replay
	}
	e := &Entry{Finish: c.FinishReason, Usage: r.Usage.usage()}
	if c.Message.Content != nil {
		e.Text = *c.Message.Content
	}
	for _, tc := range c.Message.ToolCalls {
		e.ToolCalls = append(e.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return e, e.checkFinish()
}

func (e *Entry) checkFinish() error {
	if !storableFinish(e.Finish) {
		return notStorable("finish reason " + e.Finish)
	}
	return nil
}

type anUsageIn struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// usage is Anthropic's usage in the gateway's convention: prompt counts
// every input token, cached or not (SPEC 10.2).
func (u anUsageIn) usage() Usage {
	return Usage{PromptTokens: u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
		CompletionTokens: u.OutputTokens, CachedTokens: u.CacheReadInputTokens}
}

// finishOfStop maps an Anthropic stop reason to a storable finish ("" when
// it is not one).
func finishOfStop(stop string) string {
	switch stop {
	case "end_turn", "stop_sequence":
		return "stop"
	case "max_tokens":
		return "length"
	case "tool_use":
		return "tool_calls"
	}
	return ""
}

func anthropicEntry(body []byte) (*Entry, error) {
	if e, ok := anthropicEntryFast(body); ok {
		return e, e.checkFinish()
	}
	return anthropicEntrySlow(body)
}

// anthropicEntrySlow reads any sync Anthropic answer with encoding/json.
func anthropicEntrySlow(body []byte) (*Entry, error) {
	var r struct {
		Type    string `json:"type"`
		Content []struct {
			Type  string          `json:"type"`
			Text  string          `json:"text"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		StopReason string    `json:"stop_reason"`
		Usage      anUsageIn `json:"usage"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, notStorable("body: " + err.Error())
	}
	e := &Entry{Finish: finishOfStop(r.StopReason), Usage: r.Usage.usage()}
	var text strings.Builder
	for _, b := range r.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			e.ToolCalls = append(e.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: compactJSON(b.Input)})
		default:
			return nil, notStorable("content block " + b.Type)
		}
	}
	e.Text = text.String()
	return e, e.checkFinish()
}

// compactJSON is raw without insignificant whitespace ("{}" when empty).
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if len(bytes.TrimSpace(raw)) == 0 || json.Compact(&b, raw) != nil {
		return "{}"
	}
	return b.String()
}

// respObjectIn is the part of a Responses object an entry needs.
type respObjectIn struct {
	Status            string          `json:"status"`
	IncompleteDetails *respIncomplete `json:"incomplete_details"`
	Output            []respItemIn    `json:"output"`
	Usage             *respUsageIn    `json:"usage"`
}

type respIncomplete struct {
	Reason string `json:"reason"`
}

type respItemIn struct {
	Type      string       `json:"type"`
	Content   []respPartIn `json:"content"`
	CallID    string       `json:"call_id"`
	Name      string       `json:"name"`
	Arguments string       `json:"arguments"`
}

type respPartIn struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type respUsageIn struct {
	InputTokens        int `json:"input_tokens"`
	OutputTokens       int `json:"output_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

func responsesEntry(body []byte) (*Entry, error) {
	if r, ok := responsesObjectFast(body); ok {
		return r.entry()
	}
	return responsesEntrySlow(body)
}

// responsesEntrySlow reads any Responses object with encoding/json.
func responsesEntrySlow(body []byte) (*Entry, error) {
	var r respObjectIn
	if err := json.Unmarshal(onlyMembers(body, respObjectFields), &r); err != nil {
		return nil, notStorable("body: " + err.Error())
	}
	return r.entry()
}

// respObjectFields are the members respObjectIn reads.
var respObjectFields = []string{"status", "incomplete_details", "output", "usage"}

// onlyMembers returns the JSON object body with only the members whose key
// can name one of fields (spelled in any case, or with an escape):
// json.Unmarshal into a struct of those fields decodes the same from it as
// from body, without decoding the rest. A Responses object echoes the
// request's tools, tens of KB for an agent. body itself when it is not a
// valid object (Unmarshal then words the error) or has nothing to drop.
func onlyMembers(body []byte, fields []string) []byte {
	if !jsonspan.Valid(body) {
		return body
	}
	out := make([]byte, 0, 512)
	out = append(out, '{')
	dropped := false
	walked := wire.EachMember(body, func(k, v []byte) bool {
		keep := bytes.IndexByte(k, '\\') >= 0
		for _, f := range fields {
			keep = keep || (len(k) == len(f) && strings.EqualFold(string(k), f))
		}
		if !keep {
			dropped = true
			return true
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(append(out, '"'), k...), '"', ':'), v...)
		return true
	})
	if !walked || !dropped {
		return body
	}
	return append(out, '}')
}

func (r *respObjectIn) entry() (*Entry, error) {
	e := &Entry{}
	var text strings.Builder
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			for _, p := range it.Content {
				if p.Type != "output_text" {
					return nil, notStorable("output part " + p.Type)
				}
				text.WriteString(p.Text)
			}
		case "function_call":
			e.ToolCalls = append(e.ToolCalls, ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments})
		case "reasoning":
			// a chat upstream's answer carries none; one from elsewhere is
			// not needed to replay the answer
		default:
			return nil, notStorable("output item " + it.Type)
		}
	}
	e.Text = text.String()
	switch {
	case r.Status == "completed" && len(e.ToolCalls) > 0:
		e.Finish = "tool_calls"
	case r.Status == "completed":
		e.Finish = "stop"
	case r.Status == "incomplete" && r.IncompleteDetails != nil && r.IncompleteDetails.Reason == "max_output_tokens":
		e.Finish = "length"
	default:
		return nil, notStorable("status " + r.Status)
	}
	if u := r.Usage; u != nil {
		e.Usage = Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, CachedTokens: u.InputTokensDetails.CachedTokens}
	}
	return e, nil
}

func embeddingsEntry(body []byte) (*Entry, error) {
	var r struct {
		Data []struct {
			Index     int             `json:"index"`
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
		Usage *oaUsageIn `json:"usage"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, notStorable("body: " + err.Error())
	}
	if len(r.Data) == 0 {
		return nil, notStorable("no embeddings")
	}
	sort.SliceStable(r.Data, func(i, j int) bool { return r.Data[i].Index < r.Data[j].Index })
	e := &Entry{Embeddings: true, Usage: r.Usage.usage(), Vectors: make([][]float64, len(r.Data))}
	for i, d := range r.Data {
		if d.Index != i {
			return nil, notStorable("embedding indexes are not 0..n-1")
		}
		v, err := vectorOf(d.Embedding)
		if err != nil {
			return nil, err
		}
		e.Vectors[i] = v
	}
	return e, nil
}

// vectorOf reads an embedding: an array of numbers, or base64 of
// little-endian float32s (encoding_format base64).
func vectorOf(raw json.RawMessage) ([]float64, error) {
	var s string
	if isString(raw) && json.Unmarshal(raw, &s) == nil {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b)%4 != 0 {
			return nil, notStorable("embedding is not base64 float32s")
		}
		v := make([]float64, len(b)/4)
		for i := range v {
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
		return v, nil
	}
	var v []float64
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, notStorable("embedding: " + err.Error())
	}
	return v, nil
}

var storableFinishes = map[string]string{`"stop"`: "stop", `"length"`: "length", `"tool_calls"`: "tool_calls"}

// exactMember names the member k among names: the name when k is spelled
// exactly so, "" when k is none of them (a member encoding/json would
// ignore), and "?" when encoding/json might still match it to one (a key
// with an escape, or in another case): the fast readers then give up.
func exactMember(k []byte, names ...string) string {
	if bytes.IndexByte(k, '\\') >= 0 {
		return "?"
	}
	for _, n := range names {
		if string(k) == n {
			return n
		}
	}
	ascii := true
	for _, c := range k {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	for _, n := range names {
		// an ASCII key folds to an ASCII name of its own length only (the
		// names are ASCII); another key may fold through a multi-byte rune
		if (!ascii || len(k) == len(n)) && strings.EqualFold(string(k), n) {
			return "?"
		}
	}
	return ""
}
