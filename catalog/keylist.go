package catalog

import (
	"encoding/json"

	"switchyard/internal/jsonspan"
)

// KeyList is a team's keys. It decodes into a list of exactly its length:
// encoding/json grows a slice by doubling, which for 100,000 keys held
// about 45 MB at once while a node restarting loaded the stored catalog,
// and kept 30% of it as slack for good.
type KeyList []Key

// UnmarshalJSON decodes a JSON array of keys (or null) from b, the array's
// own bytes in the document (encoding/json has validated them and passes
// them without a copy): its elements are counted first, then decoded one
// at a time into a list of that length.
func (l *KeyList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*l = nil
		return nil
	}
	n := 0
	if err := jsonspan.EachElement(b, func(int, []byte) error { n++; return nil }); err != nil {
		return err
	}
	keys := make(KeyList, n)
	if err := jsonspan.EachElement(b, func(i int, elem []byte) error { return json.Unmarshal(elem, &keys[i]) }); err != nil {
		return err
	}
	*l = keys
	return nil
}
