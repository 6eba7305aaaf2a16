package cache

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestEncodeDecode(t *testing.T) {
	all := []*Entry{
		entries["text"], entries["tools"], entries["length"],
		{Embeddings: true, Vectors: [][]float64{{1, -2.5}, {}, {3}}, Usage: Usage{PromptTokens: 2}, Model: "e", StoredAt: t0},
	}
	for _, e := range all {
		b := e.Encode(nil)
		if len(b) > e.EncodedSize() {
			t.Fatalf("encoded %d bytes, EncodedSize said at most %d", len(b), e.EncodedSize())
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		want := *e
		if want.Vectors != nil && len(want.Vectors[1]) == 0 {
			want.Vectors = [][]float64{{1, -2.5}, {}, {3}}
		}
		if !reflect.DeepEqual(got, &want) {
			t.Fatalf("round trip:\n%+v\n%+v", got, &want)
		}
		// every truncation is refused, never a panic
		for i := range b {
			if _, err := Decode(b[:i]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("truncated at %d: %v", i, err)
			}
		}
		if _, err := Decode(append(bytes.Clone(b), 0)); !errors.Is(err, ErrCorrupt) {
			t.Fatal("trailing byte accepted")
		}
	}
}

func TestEncodeZeroTime(t *testing.T) {
	e, err := Decode((&Entry{Finish: "stop"}).Encode(nil))
	if err != nil || e.StoredAt.UnixMilli() != 0 {
		t.Fatalf("%v %v", err, e)
	}
}

func TestAge(t *testing.T) {
	e := &Entry{StoredAt: t0}
	if got := e.Age(t0.Add(2999e6)); got != 2 {
		t.Fatalf("age %d", got)
	}
	if got := e.Age(t0.Add(-5e9)); got != 0 {
		t.Fatalf("age before storing %d", got)
	}
}

// FuzzDecode: no input makes Decode panic or allocate beyond its size, and
// whatever it accepts encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, e := range entries {
		f.Add(e.Encode(nil))
	}
	f.Add((&Entry{Embeddings: true, Vectors: [][]float64{{1, 2}}}).Encode(nil))
	f.Add([]byte{encMagic, encVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			return
		}
		if again := e.Encode(nil); !bytes.Equal(again, b) {
			// varints have one canonical spelling only when minimal: a
			// decoded entry must at least decode to itself again
			e2, err := Decode(again)
			if err != nil || !reflect.DeepEqual(e, e2) {
				t.Fatalf("re-encoding changed the entry: %v", err)
			}
		}
	})
}
