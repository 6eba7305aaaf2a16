package cache

import (
	"testing"
	"time"

	"switchyard/catalog"
	"switchyard/internal/agentturn"
	"switchyard/wire"
)

func BenchmarkKey(b *testing.B) {
	for _, c := range []struct {
		name string
		r    keyReq
	}{{"openai", oa(oaBase)}, {"openai-tools", oa(oaTools)}, {"anthropic-tools", an(anTools)}, {"responses-tools", rs(rsTools)},
		{"embeddings", emb(`{"model":"e","input":["a","b","c"]}`)},
		{"openai-agent", oa(agentturn.OpenAI())}, {"anthropic-agent", an(agentturn.Anthropic())}, {"responses-agent", rs(agentturn.Responses())}} {
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
	for _, format := range []wire.Format{wire.FormatOpenAI, wire.FormatAnthropic, wire.FormatResponses} {
		for _, name := range []string{"text", "tools"} {
			body, err := Render(entries[name], target(b, format, false))
			if err != nil {
				b.Fatal(err)
			}
			switch format {
			case wire.FormatAnthropic:
				name = "anthropic-" + name
			case wire.FormatResponses:
				name = "responses-" + name
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := FromBody(catalog.OpChat, format, body, meta); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
