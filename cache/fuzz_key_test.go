package cache

import (
	"encoding/json"
	"testing"

	"switchyard/catalog"
	"switchyard/wire"
)

// FuzzKey: the canonicalizer never panics on any body in any format, and a
// body it accepts keeps its key when re-encoded with other key order and
// whitespace.
func FuzzKey(f *testing.F) {
	for _, s := range []string{oaBase, anBase, rsBase, oaTools, anTools, rsTools, `{"model":"e","input":["a","b"]}`, `{}`, `[]`, `{"messages":[{"content":[{"type":"x"}]}]}`} {
		for fm := range 3 {
			f.Add(s, uint8(fm))
		}
	}
	f.Fuzz(func(t *testing.T, body string, fm uint8) {
		format := wire.Format(fm % 3)
		op := catalog.OpChat
		if fm%4 == 3 {
			op, format = catalog.OpEmbeddings, wire.FormatOpenAI
		}
		k, err := KeyOf(op, format, []byte(body), "t", "")
		if err != nil {
			return
		}
		var v any
		if json.Unmarshal([]byte(body), &v) != nil {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		again, _ := json.MarshalIndent(v, " ", "  ")
		k2, err := KeyOf(op, format, again, "t", "")
		if err != nil || k2 != k {
			t.Fatalf("re-encoded %q: key %v err %v", again, k2 == k, err)
		}
	})
}
