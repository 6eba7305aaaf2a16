package jsonspan

import "encoding/json"

// Decode reads data into v with fast, a reader of the shapes clients and
// upstreams write, which returns false for anything else; then v is reset
// and encoding/json decodes data, and decides and words any error. Every
// fast reader follows one rule: what it accepts, it reads as
// json.Unmarshal would (each has a fuzz test holding it to that).
func Decode[T any](data []byte, v *T, fast func([]byte, *T) bool) error {
	if fast(data, v) {
		return nil
	}
	var zero T
	*v = zero
	return json.Unmarshal(data, v)
}
