package cache

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"switchyard/catalog"
	"switchyard/wire"
)

func BenchmarkKey(b *testing.B) {
	for _, c := range []struct {
		name string
		r    keyReq
	}{{"openai", oa(oaBase)}, {"openai-tools", oa(oaTools)}, {"anthropic-tools", an(anTools)}, {"responses-tools", rs(rsTools)},
		{"embeddings", emb(`{"model":"e","input":["a","b","c"]}`)},
		{"openai-agent", oa(agentRequest(wire.FormatOpenAI))}, {"anthropic-agent", an(agentRequest(wire.FormatAnthropic))}} {
		body := []byte(c.r.body)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := KeyOf(c.r.op, c.r.format, body, "team", ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkReplay(b *testing.B) {
	e := entries["tools"]
	enc := e.Encode(nil)
	for _, f := range formats {
		for _, stream := range []bool{false, true} {
			tg := target(b, f.format, stream)
			name := f.name + map[bool]string{false: "-sync", true: "-stream"}[stream]
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					d, err := Decode(enc)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := Render(d, tg); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkLocalGet(b *testing.B) {
	l := NewLocal(64 << 20)
	val := entries["text"].Encode(nil)
	for i := range 10000 {
		l.Put(key(i), val, "t", "m", t0, time.Hour)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.Get(key(i%10000), t0)
		i++
	}
}

func BenchmarkFromBody(b *testing.B) {
	for _, name := range []string{"text", "tools"} {
		body, _ := Render(entries[name], Target{Format: wire.FormatOpenAI, Now: t0})
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := FromBody(catalog.OpChat, wire.FormatOpenAI, body, meta); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// agentRequest is a coding agent's turn in format f (OpenAI chat or
// Anthropic Messages): 20 tools, each with agentSchema's 1.3 KB of
// parameters, and 12 earlier turns of tool calls and their results (about
// 40 KB). An agent sends all of it on every turn.
func agentRequest(f wire.Format) string {
	var b strings.Builder
	b.WriteString(`{"model":"m","max_tokens":4096,"tools":[`)
	for i := range 20 {
		if i > 0 {
			b.WriteByte(',')
		}
		if f == wire.FormatAnthropic {
			fmt.Fprintf(&b, `{"name":"tool_%d","description":"Tool number %d of the agent","input_schema":%s}`, i, i, agentSchema)
		} else {
			fmt.Fprintf(&b, `{"type":"function","function":{"name":"tool_%d","description":"Tool number %d of the agent","parameters":%s}}`, i, i, agentSchema)
		}
	}
	b.WriteString(`],"messages":[{"role":"user","content":"Fix the failing test in pkg/server and explain the change."}`)
	result := strings.Repeat(`line of a file the tool read, with \"quotes\" and a tab\t`, 12)
	for i := range 12 {
		args := fmt.Sprintf(`{"file_path":"/src/pkg/server/file_%d.go","old_string":"return nil","new_string":"return err","replace_all":false}`, i)
		if f == wire.FormatAnthropic {
			fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"text","text":"Reading file %d."},{"type":"tool_use","id":"call_%d","name":"tool_%d","input":%s}]}`, i, i, i%20, args)
			fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_%d","content":"%s"}]}`, i, result)
		} else {
			fmt.Fprintf(&b, `,{"role":"assistant","content":"Reading file %d.","tool_calls":[{"id":"call_%d","type":"function","function":{"name":"tool_%d","arguments":%q}}]}`, i, i, i%20, args)
			fmt.Fprintf(&b, `,{"role":"tool","tool_call_id":"call_%d","content":"%s"}`, i, result)
		}
	}
	b.WriteString(`]}`)
	return b.String()
}
