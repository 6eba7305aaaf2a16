package cache

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"switchyard/internal/agentturn"
)

// canonJSONReference is the definition canonJSON is held to: Marshal of
// what Unmarshal decodes into an any.
func canonJSONReference(raw []byte) ([]byte, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil, false
	}
	out, err := json.Marshal(v)
	return out, err == nil
}

var canonCases = []string{
	`{"b":1,"a":[true,false,null],"c":{"z":"x","y":-0.0}}`,
	`{"type":"object","properties":{"city":{"type":"string","description":"a <city> & \"name\""}},"required":["city"]}`,
	`{"a":1,"a":2,"\u0061":3}`,
	`[1.0, 1e2, 1E-7, 0.000001, 123456789012345678901234, -1e21, 1e20, 0e0, -0]`,
	`"\ud83d\ude00 \u2028 \u00e9 \/ \b\f\n\r\t \u0001"`,
	"\"caf\xc3 \xff\xfe\"",
	`{"\u00e9":1,"e":2,"é":3}`,
	` { "spaced" : [ 1 , 2 ] } `,
	`1e400`, `[1e-400]`, `{"a":}`, `"unterminated`, ``, `null`,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
}

func TestCanonJSONIsMarshalOfUnmarshal(t *testing.T) {
	for _, c := range canonCases {
		checkCanon(t, []byte(c))
	}
}

func FuzzCanonJSON(f *testing.F) {
	for _, c := range canonCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkCanon(t, raw) })
}

func checkCanon(t *testing.T, raw []byte) {
	t.Helper()
	got, err := canonJSON(raw)
	if isNull(raw) {
		if got != nil || err != nil {
			t.Fatalf("canonJSON(null) = %s, %v; want nil, nil", got, err)
		}
		return
	}
	want, ok := canonJSONReference(raw)
	if !ok {
		if err == nil {
			t.Fatalf("canonJSON(%q) = %s; encoding/json refuses it", raw, got)
		}
		return
	}
	if err != nil {
		t.Fatalf("canonJSON(%q): %v; encoding/json gives %s", raw, err, want)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("canonJSON(%q)\n got %s\nwant %s", raw, got, want)
	}
}

// BenchmarkCanonJSON is one tool's parameter schema of an agent (about
// 1.3 KB), canonicalized as every turn's key does.
func BenchmarkCanonJSON(b *testing.B) {
	raw := []byte(agentturn.Schema)
	// an edit's arguments, as a coding agent's tool call carries them: code
	// whose newlines, quotes and backslashes are escapes in the JSON
	code := strings.Repeat("\tif err := run(\"x\\y\"); err != nil {\n\t\treturn fmt.Errorf(\"run: %w\", err) // é\n\t}\n", 40)
	edit, _ := json.Marshal(map[string]string{"path": "gateway/cache.go", "old_string": code, "new_string": code})
	b.Run("edit-arguments", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(edit)))
		for b.Loop() {
			if _, err := canonJSON(edit); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("walker", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := canonJSON(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal-of-unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, ok := canonJSONReference(raw); !ok {
				b.Fatal("refused")
			}
		}
	})
}
