package catalog

import (
	"encoding/json"
	"reflect"
	"testing"
)

// A KeyList decodes what a plain []Key decodes, into a list of exactly its
// length, whatever the elements' strings hold (brackets, commas, escaped
// quotes) and the whitespace between them.
func TestKeyListDecode(t *testing.T) {
	cases := []string{
		`null`,
		`[]`,
		` [ ] `,
		`[{"id":"a","name":"x"}]`,
		"[\n {\"id\":\"a\",\"name\":\"[,]{\\\"}\"} ,\n\t{\"id\":\"b\",\"models\":[\"m\",\"n\"],\"rpm\":5}\n]",
		`[{"id":"c","name":"\\","budget":{"usd":1.5,"period":"daily"}},{"id":"d"},{"id":"e"}]`,
	}
	for _, c := range cases {
		var want []Key
		if err := json.Unmarshal([]byte(c), &want); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		var got struct {
			Keys KeyList `json:"keys"`
		}
		if err := json.Unmarshal([]byte(`{"keys":`+c+`}`), &got); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if !reflect.DeepEqual([]Key(got.Keys), want) || cap(got.Keys) != len(got.Keys) {
			t.Fatalf("%s: got %+v (cap %d), want %+v", c, got.Keys, cap(got.Keys), want)
		}
	}
	var bad struct{ Keys KeyList }
	if err := json.Unmarshal([]byte(`{"Keys":{"id":"a"}}`), &bad); err == nil {
		t.Fatal("an object decoded as a key list")
	}
}

// FuzzKeyList: any array a plain []Key decodes, a KeyList decodes to the
// same keys; what one refuses the other refuses.
func FuzzKeyList(f *testing.F) {
	f.Add(`[{"id":"a","name":"[,]"}, {"id":"b"}]`)
	f.Add(`[]`)
	f.Add(`[1]`)
	f.Add(`["x"]`)
	f.Add(`[{"id":"a"},]`)
	f.Fuzz(func(t *testing.T, arr string) {
		var want struct{ Keys []Key }
		errWant := json.Unmarshal([]byte(`{"Keys":`+arr+`}`), &want)
		var got struct{ Keys KeyList }
		errGot := json.Unmarshal([]byte(`{"Keys":`+arr+`}`), &got)
		if (errWant == nil) != (errGot == nil) {
			t.Fatalf("%q: []Key error %v, KeyList error %v", arr, errWant, errGot)
		}
		if errWant == nil && !reflect.DeepEqual([]Key(got.Keys), want.Keys) {
			t.Fatalf("%q: got %+v want %+v", arr, got.Keys, want.Keys)
		}
	})
}
