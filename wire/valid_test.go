package wire

import (
	"encoding/json"
	"unicode/utf8"
)

func jsonValid(b []byte) bool { return json.Valid(b) }

func utf8Valid(b []byte) bool { return utf8.Valid(b) }
