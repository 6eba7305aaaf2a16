package jsonspan

import "testing"

// TestDecode: what fast reads stands; what it leaves is read by
// encoding/json into a v reset first (fast's partial writes gone).
func TestDecode(t *testing.T) {
	type pair struct{ A, B string }
	onlyA := func(data []byte, p *pair) bool {
		p.B = "partial" // a fast reader may have written before it gave up
		if string(data) != `{"A":"x"}` {
			return false
		}
		p.A, p.B = "x", ""
		return true
	}
	var p pair
	if err := Decode([]byte(`{"A":"x"}`), &p, onlyA); err != nil || p != (pair{A: "x"}) {
		t.Fatalf("fast: %+v, %v", p, err)
	}
	p = pair{}
	if err := Decode([]byte(`{"A":"y"}`), &p, onlyA); err != nil || p != (pair{A: "y"}) {
		t.Fatalf("encoding/json: %+v, %v", p, err)
	}
	if err := Decode([]byte(`{"A":1}`), &p, onlyA); err == nil {
		t.Fatal("encoding/json's error lost")
	}
}
