package providers

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"

	"switchyard/providers/bedrockfake"
	"switchyard/routing"
	"switchyard/wire"
)

// bedrockFuzzSeeds are event-stream bodies: well-formed streams (text,
// tools, an exception) and the malformed shapes the fuzzer grows from.
func bedrockFuzzSeeds() [][]byte {
	text := bedrockfake.Bytes(
		bedrockfake.Event("messageStart", `{"role":"assistant"}`),
		bedrockfake.Event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`),
		bedrockfake.Event("contentBlockStop", `{"contentBlockIndex":0}`),
		bedrockfake.Event("messageStop", `{"stopReason":"end_turn"}`),
		bedrockfake.Event("metadata", `{"usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4}}`))
	tools := bedrockfake.Bytes(
		bedrockfake.Event("messageStart", `{"role":"assistant"}`),
		bedrockfake.Event("contentBlockStart", `{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"t1","name":"f"}}}`),
		bedrockfake.Event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{\"a\":1}"}}}`),
		bedrockfake.Event("messageStop", `{"stopReason":"tool_use"}`))
	exception := bedrockfake.Bytes(
		bedrockfake.Event("messageStart", `{"role":"assistant"}`),
		bedrockfake.Exception("throttlingException", "slow down"))
	badCRC := bytes.Clone(text)
	badCRC[len(badCRC)-1] ^= 1
	return [][]byte{text, tools, exception, badCRC, text[:len(text)/2], manyHeaders(5000), {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, nil}
}

// manyHeaders is one frame whose prelude is valid (right CRC) and whose
// headers section holds n empty boolean headers.
func manyHeaders(n int) []byte {
	headers := bytes.Repeat([]byte{1, 'x', 0}, n) // name length 1, name "x", type bool-true
	total := uint32(12 + len(headers) + 4)
	var b []byte
	b = binary.BigEndian.AppendUint32(b, total)
	b = binary.BigEndian.AppendUint32(b, uint32(len(headers)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	b = append(b, headers...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// FuzzBedrockFrames feeds arbitrary bytes to the event-stream reader and
// the translation into every client format: never a panic, the output
// bounded by the input, and any failure a classified *Error.
func FuzzBedrockFrames(f *testing.F) {
	for _, s := range bedrockFuzzSeeds() {
		f.Add(s)
	}
	reqs := map[wire.Format]string{
		wire.FormatOpenAI:    `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
		wire.FormatAnthropic: `{"model":"m","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		wire.FormatResponses: `{"model":"m","stream":true,"input":"hi"}`,
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for format, raw := range reqs {
			req := bedrockClientReq(t, []byte(raw), format, true)
			s := &bedrockStream{ctx: t.Context(), body: io.NopCloser(bytes.NewReader(body)), ev: newBedrockEvents(req, "id", "m", 1), r: newFrameReader(bytes.NewReader(body))}
			var out int
			for {
				ev, err := s.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					var e *Error
					if !errors.As(err, &e) {
						t.Fatalf("unclassified error %T %v", err, err)
					}
					break
				}
				out += len(ev)
			}
			// every relayed event comes from a frame's payload, plus framing
			if out > 64*len(body)+4096 {
				t.Fatalf("%d bytes relayed from %d bytes of input", out, len(body))
			}
		}
	})
}

// TestBedrockManyHeaders: a frame with thousands of headers is refused
// before decoding (bounded allocation), with a classified error.
func TestBedrockManyHeaders(t *testing.T) {
	_, err := newFrameReader(bytes.NewReader(manyHeaders(100000))).next()
	var e *Error
	if !errors.As(err, &e) || e.Class != routing.ClassServerError || !strings.Contains(e.Message, "headers") {
		t.Fatalf("%v", err)
	}
}

// FuzzBedrockBodies feeds arbitrary JSON-ish bytes to everything else that
// reads what Bedrock (or a client, toward Bedrock) sends: a Converse answer
// into each client format, an error body, a stream event payload of each
// type, and an Anthropic-format client body toward Converse.
func FuzzBedrockBodies(f *testing.F) {
	for _, s := range []string{
		`{"output":{"message":{"role":"assistant","content":[{"text":"hi"},{"toolUse":{"toolUseId":"t","name":"f","input":{"a":1}}}]}},"stopReason":"tool_use","usage":{"inputTokens":1,"outputTokens":2,"totalTokens":3}}`,
		`{"output":{"message":{"role":"assistant","content":[]}},"stopReason":"guardrail_intervened","usage":{"inputTokens":-1,"outputTokens":99999999999}}`,
		`{"__type":"com.amazon.coral.validate#ValidationException","message":"Input is too long"}`,
		`{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"t","name":"f"}},"delta":{"toolUse":{"input":"{"}}}`,
		`{"contentBlockIndex":-4,"delta":{"text":"x"}}`,
		`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]}`,
		``, `{`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	events := []string{"messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata", "unknown"}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, c := range []struct {
			raw    string
			format wire.Format
		}{
			{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, wire.FormatOpenAI},
			{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, wire.FormatAnthropic},
			{`{"model":"m","input":"hi"}`, wire.FormatResponses},
		} {
			_, _, _ = converseToClient(body, bedrockClientReq(t, []byte(c.raw), c.format, false), "id", "m", 1)
		}
		_ = newBedrockError(400, nil, body)
		_ = bedrockStreamException(string(body), body)
		_, _ = anthropicRawToConverse(body)
		pivot := newConverseToAnthropicStream("id", "m")
		for _, ev := range events {
			if _, done, err := pivot.event(ev, body); err != nil || done {
				break
			}
		}
		_, _ = pivot.eof()
	})
}
