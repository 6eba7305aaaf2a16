package cache

import (
	"bytes"
	"fmt"
	"testing"

	"switchyard/internal/agentturn"
)

func TestCanonMemoBounded(t *testing.T) {
	m := &canonMemo{maxBytes: 4096}
	for i := range 1000 {
		raw := []byte(fmt.Sprintf(`{"n":%d,"pad":"%0200d"}`, i, 0))
		m.put(raw, raw)
		if got, ok := m.get(raw); !ok || !bytes.Equal(got, raw) {
			t.Fatalf("entry %d not found right after its put", i)
		}
		held := 0
		for k, v := range m.cur {
			held += len(k) + len(v)
		}
		for k, v := range m.prev {
			held += len(k) + len(v)
		}
		if held > m.maxBytes {
			t.Fatalf("after %d puts the memo holds %d bytes, bound %d", i+1, held, m.maxBytes)
		}
	}
	if _, ok := m.get([]byte(`{"n":0}`)); ok {
		t.Fatal("a value never put was found")
	}
}

// TestSchemaOfMemoIsCanonJSON: a schema answered from the memo is the one
// canonJSON gives, and a different schema of the same length is not
// answered with it.
func TestSchemaOfMemoIsCanonJSON(t *testing.T) {
	a := []byte(agentturn.Schema)
	b := bytes.Replace([]byte(agentturn.Schema), []byte(`"file_path"`), []byte(`"file_name"`), 1)
	for range 2 {
		for _, raw := range [][]byte{a, b} {
			got, err := schemaOf(raw)
			want, _ := canonJSONReference(raw)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("schemaOf = %s, %v; want %s", got, err, want)
			}
		}
	}
}
