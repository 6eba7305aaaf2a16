package jsonspan

import (
	"encoding/json"
	"strings"
	"testing"
)

var validCases = []string{
	``, ` `, `{}`, `[]`, `""`, `0`, `-0`, `1.5e+10`, `-1E-2`, `true`, `false`, `null`,
	` {"a" : [1, 2, {"b": null}], "c": "\u00e9\n"} `,
	`{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a"}`, `{"a":}`, `{"a" 1}`, `{1:2}`, `[1 2]`, `[1,,2]`,
	`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x1`, `1.5.5`, `--1`, `tru`, `nulll`, `truefalse`,
	`"\x"`, `"\u12"`, `"\u12g4"`, "\"a\tb\"", "\"\x7f\xff\"", `"abc`, `"\"`, `"\\"`, `"\/"`,
	`{"a":1}}`, `[[]`, `[]]`, `{"a":[}`, `[{]}`, `{} {}`, `1 2`, "\v1", "1\u00a0",
	strings.Repeat(`[`, 63) + strings.Repeat(`]`, 63),
	strings.Repeat(`[`, 64) + strings.Repeat(`]`, 64),
	strings.Repeat(`[`, 65) + strings.Repeat(`]`, 65),
	strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat(`}`, 70),
	strings.Repeat(`[`, 70) + strings.Repeat(`]`, 69),
	`"` + strings.Repeat("long text without escapes ", 5) + `"`, `"` + strings.Repeat("a", 17) + "\x01" + `"`,
	`"` + strings.Repeat("b", 15) + `\u00e9` + strings.Repeat("c", 9) + `\"` + `"`, `"` + strings.Repeat("d", 16),
	`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":16}}`,
}

func TestValidMatchesEncodingJSON(t *testing.T) {
	for _, c := range validCases {
		if got, want := Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%q) = %v, encoding/json says %v", c, got, want)
		}
	}
}

// FuzzValid holds Valid to encoding/json.Valid's answer for any input.
func FuzzValid(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	// a chat answer, and a 64 KiB request: an agent's conversation, its
	// text mostly plain
	var long strings.Builder
	long.WriteString(`{"model":"m","messages":[`)
	for i := 0; long.Len() < 64<<10; i++ {
		if i > 0 {
			long.WriteString(",")
		}
		long.WriteString(`{"role":"user","content":"` + strings.Repeat("Refactor the parser so that it reads each value once. ", 20) + `\n\"quoted\" line"}`)
	}
	long.WriteString(`]}`)
	for _, c := range []struct{ name, body string }{{"answer", validCases[len(validCases)-1]}, {"request-64KiB", long.String()}} {
		body := []byte(c.body)
		if !json.Valid(body) {
			b.Fatal("invalid benchmark body")
		}
		b.Run(c.name+"/jsonspan", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				Valid(body)
			}
		})
		b.Run(c.name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				json.Valid(body)
			}
		})
	}
}

// skipStringByteWise is SkipString as it was written first, a byte at a
// time: the reference FuzzSkipString holds the IndexByte version to, on
// any input.
func skipStringByteWise(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

func FuzzSkipString(f *testing.F) {
	for _, c := range []string{`"0123456789abcde\\"x"`, `"0123456789abcdef\\"x"`, `"0123456789abcd\\\\"`, `"0123456789abcdefghij\\\\\\"k"`, `""`, `"a"`, `"\""`, `"\\"`, `"\\\""x`, `"\`, `"abc`, `"a\\\\"b"`, `x`, ``} {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := SkipString(b, 0), skipStringByteWise(b, 0); got != want {
			t.Fatalf("SkipString(%q) = %d, byte-wise %d", b, got, want)
		}
	})
}

// walkAll reads the next value with c: a null through Null, objects and
// arrays through Object and Array down to depth, anything else (and deeper) with Value.
func walkAll(c *Cursor, depth int) bool {
	if depth > 0 && c.Null() {
		return true
	}
	if depth > 0 && c.at('{') {
		return c.Object(func([]byte) bool { return walkAll(c, depth-1) })
	}
	if depth > 0 && c.at('[') {
		return c.Array(func() bool { return walkAll(c, depth-1) })
	}
	_, ok := c.Value()
	return ok
}

// FuzzCursor: a cursor that walks a whole text accepts exactly what Valid
// (and so encoding/json) accepts, whether it walks containers or takes
// them whole, and Value's span is the value without its space.
func FuzzCursor(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":null}],"c":"x\u00e9"}`, ` [ ] `, `{"a":1,}`, `[1 2]`, `{"a" 1}`, `"\x"`, `{}`, `-0.5e+3`, `{"a":{"b":[[]]}}`, `[`, `{"a":}`} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, depth int) {
		depth %= 8
		c := NewCursor([]byte(s))
		got := walkAll(&c, depth) && c.End()
		if want := Valid([]byte(s)); got != want {
			t.Fatalf("%q depth %d: cursor %v, Valid %v", s, depth, got, want)
		}
		c = NewCursor([]byte(s))
		if v, ok := c.Value(); ok && string(v) != strings.TrimSpace(string(v)) {
			t.Fatalf("%q: Value %q carries space", s, v)
		}
		// a trusted cursor reads a valid text as the validating one does,
		// value for value, and never reads past any text
		var vals, tvals []string
		record := func(dst *[]string) func(c *Cursor, depth int) bool {
			var walk func(c *Cursor, depth int) bool
			walk = func(c *Cursor, depth int) bool {
				if depth > 0 && c.Peek() == '{' {
					return c.Object(func(k []byte) bool { *dst = append(*dst, "k:"+string(k)); return walk(c, depth-1) })
				}
				if depth > 0 && c.Peek() == '[' {
					return c.Array(func() bool { return walk(c, depth-1) })
				}
				v, ok := c.Value()
				*dst = append(*dst, "v:"+string(v))
				return ok
			}
			return walk
		}
		vc, tc := NewCursor([]byte(s)), NewTrustedCursor([]byte(s))
		vok := record(&vals)(&vc, depth) && vc.End()
		tok := record(&tvals)(&tc, depth) && tc.End()
		if vok && (!tok || strings.Join(tvals, "\x00") != strings.Join(vals, "\x00")) {
			t.Fatalf("%q depth %d: trusted %v %q, validating %q", s, depth, tok, tvals, vals)
		}
	})
}

// TestCursorNull: Null takes a null and leaves anything else where it was,
// a near-null included, for the next read to refuse.
func TestCursorNull(t *testing.T) {
	for _, c := range []struct {
		in   string
		null bool
		rest string
	}{{` null,1`, true, `,1`}, {`nul`, false, `nul`}, {`{"a":null}`, false, `{"a":null}`}, {`nulx`, false, `nulx`}, {` "null"`, false, `"null"`}} {
		cur := NewCursor([]byte(c.in))
		if got := cur.Null(); got != c.null || string(cur.b[cur.i:]) != c.rest {
			t.Fatalf("%q: Null %v, rest %q; want %v, %q", c.in, got, cur.b[cur.i:], c.null, c.rest)
		}
	}
}

// TestEachMemberMeasured: a measured span of b's own bytes is stepped over
// unscanned (what it covers is not read: here it is not even JSON), and a
// span that is a copy, or of other bytes, is never used.
func TestEachMemberMeasured(t *testing.T) {
	b := []byte(`{"a":1, "m":[not json, "open], "z":"y"}`) // a scan would not find the string's end
	s := strings.Index(string(b), "[")
	e := strings.Index(string(b), "]") + 1
	walk := func(measured ...[]byte) (string, error) {
		var got []string
		err := EachMemberMeasured(b, measured, func(k, v []byte) error {
			got = append(got, string(k)+"="+string(v))
			return nil
		})
		return strings.Join(got, " "), err
	}
	if got, err := walk(b[s:e]); err != nil || got != `a=1 m=[not json, "open] z="y"` {
		t.Fatalf("with the span measured: %q, %v", got, err)
	}
	for _, other := range [][]byte{append([]byte(nil), b[s:e]...), b[s+1 : e], nil, {}} {
		if got, err := walk(other); err == nil {
			t.Fatalf("a span not measured at the value (%q) was used: %q", other, got)
		}
	}
}
