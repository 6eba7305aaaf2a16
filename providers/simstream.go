package providers

import (
	"context"
	"io"
	"strconv"
	"sync"
	"time"

	"switchyard/routing"
	"switchyard/wire"
)

// simStream streams a simulated answer: one event per token, token i due
// at start + i/tokens_per_second, paced by one reused timer. Cancelling the
// context or closing the stream ends a blocked Next at once.
type simStream struct {
	// immutable after construction
	ctx       context.Context
	anthropic bool
	head      []byte // OpenAI: every chunk's prefix up to "choices":
	id        uint64
	model     string
	prompt    int
	n         int
	finish    string
	wantUsage bool
	interval  time.Duration
	start     time.Time
	closed    chan struct{}
	closeOnce sync.Once

	// owned by the goroutine calling Next
	i        int // next token
	tailSent bool
	timer    *time.Timer
}

func newSimStream(ctx context.Context, format wire.Format, model string, id uint64, created int64, prompt, n int, finish string, wantUsage bool, interval time.Duration) *simStream {
	st := &simStream{
		ctx: ctx, anthropic: format == wire.FormatAnthropic, id: id, model: model,
		prompt: prompt, n: n, finish: finish, wantUsage: wantUsage, interval: interval,
		start: time.Now(), closed: make(chan struct{}),
	}
	if !st.anthropic {
		b := append(make([]byte, 0, 96+len(model)), `{"id":"chatcmpl-sim-`...)
		b = strconv.AppendUint(b, id, 10)
		b = append(b, `","object":"chat.completion.chunk","created":`...)
		b = strconv.AppendInt(b, created, 10)
		b = append(b, `,"model":`...)
		b = wire.AppendString(b, model)
		st.head = append(b, `,"choices":`...)
	}
	return st
}

// Ended implements EventStream: the tail (finish, usage, end marker) was
// returned.
func (st *simStream) Ended() bool { return st.tailSent }

// Next implements EventStream.
func (st *simStream) Next() ([]byte, error) {
	if st.i < st.n {
		if err := st.pace(st.start.Add(time.Duration(st.i) * st.interval)); err != nil {
			return nil, err
		}
		i := st.i
		st.i++
		if st.anthropic {
			return st.anthropicToken(i), nil
		}
		return st.openAIToken(i), nil
	}
	if !st.tailSent {
		if err := st.pace(time.Time{}); err != nil {
			return nil, err
		}
		st.tailSent = true
		if st.anthropic {
			return st.anthropicTail(), nil
		}
		return st.openAITail(), nil
	}
	return nil, io.EOF
}

// pace waits until the deadline (zero: no wait) or the end of the stream.
func (st *simStream) pace(deadline time.Time) error {
	select {
	case <-st.closed:
		return &Error{Class: routing.ClassCanceled, Message: "stream closed"}
	default:
	}
	d := time.Until(deadline)
	if deadline.IsZero() || d <= 0 {
		if st.ctx.Err() != nil {
			return ctxError(st.ctx)
		}
		return nil
	}
	if st.timer == nil {
		st.timer = time.NewTimer(d)
	} else {
		st.timer.Reset(d)
	}
	select {
	case <-st.timer.C:
		return nil
	case <-st.ctx.Done():
		st.timer.Stop()
		return ctxError(st.ctx)
	case <-st.closed:
		st.timer.Stop()
		return &Error{Class: routing.ClassCanceled, Message: "stream closed"}
	}
}

// openAIToken is one chunk; the first carries the assistant role.
func (st *simStream) openAIToken(i int) []byte {
	b := make([]byte, 0, len(st.head)+96)
	b = append(b, "data: "...)
	b = append(b, st.head...)
	if i == 0 {
		b = append(b, `[{"index":0,"delta":{"role":"assistant","content":"`...)
	} else {
		b = append(b, `[{"index":0,"delta":{"content":"`...)
	}
	b = appendSimToken(b, i)
	return append(b, "\"},\"finish_reason\":null}]}\n\n"...)
}

// openAITail is the finish chunk, the usage chunk when wanted, and [DONE].
func (st *simStream) openAITail() []byte {
	b := make([]byte, 0, 2*len(st.head)+192)
	b = append(b, "data: "...)
	b = append(b, st.head...)
	if st.n == 0 {
		b = append(b, `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"`...)
	} else {
		b = append(b, `[{"index":0,"delta":{},"finish_reason":"`...)
	}
	b = append(b, st.finish...)
	b = append(b, "\"}]}\n\n"...)
	if st.wantUsage {
		b = append(b, "data: "...)
		b = append(b, st.head...)
		b = append(b, `[],"usage":`...)
		b = appendOpenAIUsage(b, st.prompt, st.n) // closes usage and the chunk
		b = append(b, "\n\n"...)
	}
	return append(b, "data: [DONE]\n\n"...)
}

// anthropicToken is one text_delta; the first is preceded by message_start
// and content_block_start.
func (st *simStream) anthropicToken(i int) []byte {
	var b []byte
	if i == 0 {
		b = st.appendMessageStart(make([]byte, 0, 512+2*len(st.model)))
		b = append(b, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"...)
	} else {
		b = make([]byte, 0, 128)
	}
	b = append(b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\""...)
	b = appendSimToken(b, i)
	return append(b, "\"}}\n\n"...)
}

func (st *simStream) appendMessageStart(b []byte) []byte {
	b = append(b, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_sim_"...)
	b = strconv.AppendUint(b, st.id, 10)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = wire.AppendString(b, st.model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(st.prompt), 10)
	return append(b, ",\"output_tokens\":0}}}\n\n"...)
}

// anthropicTail is content_block_stop, message_delta and message_stop.
func (st *simStream) anthropicTail() []byte {
	b := make([]byte, 0, 384+len(st.model))
	if st.n == 0 {
		b = st.appendMessageStart(b)
	} else {
		b = append(b, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"...)
	}
	b = append(b, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\""...)
	b = append(b, stopFromFinish(st.finish)...)
	b = append(b, `","stop_sequence":null},"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(st.prompt), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(st.n), 10)
	b = append(b, "}}\n\n"...)
	return append(b, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
}

// Usage implements EventStream.
func (st *simStream) Usage() Usage { return Usage{PromptTokens: st.prompt, CompletionTokens: st.n} }

// Close implements EventStream.
func (st *simStream) Close() error {
	st.closeOnce.Do(func() { close(st.closed) })
	return nil
}

var _ EventStream = (*simStream)(nil)
