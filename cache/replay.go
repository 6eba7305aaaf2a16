package cache

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"time"

	"switchyard/providers"
	"switchyard/wire"
)

// Target is how one client wants an answer: its format and mode, and what
// its request asked of the rendering.
type Target struct {
	Format       wire.Format
	Stream       bool
	IncludeUsage bool          // stream_options.include_usage (OpenAI streams)
	Client       *wire.Request // the parsed client request; required for Responses (its settings are echoed, Responses.ID is the new id)
	// Done receives the rendered Responses object, as for a live answer, so
	// a hit with store true is stored under its new id (SPEC 18); may be nil.
	Done providers.ResponsesDone
	// EncodingFormat is an embeddings request's encoding_format ("" or
	// "float": numbers; "base64": little-endian float32 in base64).
	EncodingFormat string
	Now            time.Time // the hit's created time
}

// NewID returns a fresh chat completion id: every hit gets its own id and
// created time (SPEC 18).
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "chatcmpl-" + hex.EncodeToString(b[:])
}

// Render renders a whole entry for t: a sync body, or every framed SSE
// event of the stream in order, terminal events included.
func Render(e *Entry, t Target) ([]byte, error) {
	if t.Now.IsZero() {
		t.Now = time.Now()
	}
	if e.Embeddings {
		if t.Stream {
			return nil, errors.New("cache: embeddings do not stream")
		}
		return renderEmbeddings(nil, e, t.EncodingFormat), nil
	}
	if !t.Stream {
		return providers.RenderAnswer(t.Format, t.Client, e.answer(NewID(), t.Now), t.Done)
	}
	r, err := NewRenderer(t, e.Model, e.Usage.PromptTokens)
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, d := range e.Deltas() {
		out = append(out, r.Render(d)...)
	}
	return out, nil
}

func (e *Entry) answer(id string, now time.Time) *providers.Answer {
	a := &providers.Answer{ID: id, Created: now.Unix(), Model: e.Model, Text: e.Text, Finish: e.Finish, Usage: e.Usage.providers()}
	for _, c := range e.ToolCalls {
		a.ToolCalls = append(a.ToolCalls, providers.AnswerCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	return a
}

func (u Usage) providers() providers.Usage {
	return providers.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CachedTokens: u.CachedTokens}
}

// DeltaKind says what a Delta carries.
type DeltaKind uint8

// The pieces of a chat answer as it arrives.
const (
	DeltaText   DeltaKind = iota + 1 // Text
	DeltaTool                        // tool call Index: its start (ID, Name) and/or a piece of Args
	DeltaFinish                      // Finish and Usage: the answer is complete
)

// Delta is one piece of a chat answer in canonical form: what a coalescing
// leader hands its followers, each of which renders it in its own format
// and mode, and what a stored entry replays as.
type Delta struct {
	Kind   DeltaKind
	Text   string
	Index  int
	ID     string
	Name   string
	Args   string
	Finish string
	Usage  Usage
}

// size is what a delta adds to a buffered history, in bytes.
func (d *Delta) size() int {
	return 64 + len(d.Text) + len(d.ID) + len(d.Name) + len(d.Args)
}

// Deltas is the entry as the pieces of a stream: its text, each tool call,
// the finish.
func (e *Entry) Deltas() []Delta {
	ds := make([]Delta, 0, 2+len(e.ToolCalls))
	if e.Text != "" {
		ds = append(ds, Delta{Kind: DeltaText, Text: e.Text})
	}
	for i, c := range e.ToolCalls {
		ds = append(ds, Delta{Kind: DeltaTool, Index: i, ID: c.ID, Name: c.Name, Args: c.Arguments})
	}
	return append(ds, Delta{Kind: DeltaFinish, Finish: e.Finish, Usage: e.Usage})
}

// Renderer renders deltas as one client's stream.
type Renderer struct {
	s *providers.AnswerStream
}

// NewRenderer starts a stream for t showing model; promptTokens is the
// prompt estimate an Anthropic message_start shows.
func NewRenderer(t Target, model string, promptTokens int) (*Renderer, error) {
	now := t.Now
	if now.IsZero() {
		now = time.Now()
	}
	s, err := providers.NewAnswerStream(t.Format, t.Client, NewID(), now.Unix(), model, promptTokens, t.IncludeUsage, t.Done)
	if err != nil {
		return nil, err
	}
	return &Renderer{s: s}, nil
}

// Render returns the framed events of one delta.
func (r *Renderer) Render(d Delta) []byte {
	switch d.Kind {
	case DeltaText:
		return r.s.Text(d.Text)
	case DeltaTool:
		return r.s.ToolCall(d.Index, d.ID, d.Name, d.Args)
	case DeltaFinish:
		return r.s.Finish(d.Finish, d.Usage.providers())
	}
	return nil
}

// renderEmbeddings writes an OpenAI embeddings response.
func renderEmbeddings(b []byte, e *Entry, encoding string) []byte {
	b = append(b, `{"object":"list","data":[`...)
	for i, v := range e.Vectors {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		if encoding == "base64" {
			raw := make([]byte, 0, 4*len(v))
			for _, x := range v {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32(x)))
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, raw)
			b = append(b, '"')
		} else {
			b = append(b, '[')
			for j, x := range v {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendFloat(b, x, 'g', -1, 64)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = wire.AppendString(b, e.Model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(e.Usage.PromptTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(e.Usage.PromptTokens), 10)
	return append(b, "}}"...)
}
