package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
)

// keyJSONBytes is about what one key adds to a stored state (its digest,
// id, prefix, name, times and limits), for sizing the buffer once.
const keyJSONBytes = 320

// encodeState is json.Marshal(s), byte for byte, built into one buffer
// sized once (hint, or an estimate from the number of keys) with the keys
// encoded one at a time: json.Marshal encodes into a buffer that doubles
// as it grows and then copies it out, about 2.5 times the state in memory
// at once (60 MB in flight for 100,000 keys, at the start that seeds the
// shared catalog). TestEncodeStateIsMarshal holds the equality.
func encodeState(s *State, hint int) ([]byte, error) {
	keys := 0
	for _, t := range s.Teams {
		keys += len(t.Keys)
	}
	shell := *s
	shell.Teams = nil
	head, err := json.Marshal(&shell)
	if err != nil {
		return nil, err
	}
	const noTeams = `"teams":null}`
	if !bytes.HasSuffix(head, []byte(noTeams)) {
		return nil, errors.New("catalog: State's last JSON field is not teams")
	}
	buf := make([]byte, 0, max(hint, len(head)+keys*keyJSONBytes+len(s.Teams)*256))
	buf = append(buf, head[:len(head)-len(noTeams)]...)
	if s.Teams == nil {
		return append(buf, noTeams...), nil
	}
	buf = append(buf, `"teams":[`...)
	for i := range s.Teams {
		if i > 0 {
			buf = append(buf, ',')
		}
		if buf, err = appendTeam(buf, &s.Teams[i]); err != nil {
			return nil, err
		}
	}
	return append(buf, "]}"...), nil
}

// appendTeam appends json.Marshal(t), its keys encoded one at a time.
func appendTeam(buf []byte, t *TeamSpec) ([]byte, error) {
	shell := *t
	shell.Keys = nil
	b, err := json.Marshal(&shell)
	if err != nil {
		return nil, err
	}
	if t.Keys == nil {
		return append(buf, b...), nil
	}
	// the keys field of a team without keys: its first occurrence (a
	// string before it has its quotes escaped)
	const noKeys = `"keys":null`
	at := bytes.Index(b, []byte(noKeys))
	if at < 0 {
		return nil, errors.New("catalog: TeamSpec's JSON has no keys field")
	}
	w := &lineWriter{buf: append(append(buf, b[:at]...), `"keys":[`...)}
	enc := json.NewEncoder(w) // its encoding buffer is reused key after key
	for i := range t.Keys {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		if err := enc.Encode(&t.Keys[i]); err != nil {
			return nil, err
		}
	}
	w.buf = append(w.buf, ']')
	return append(w.buf, b[at+len(noKeys):]...), nil
}

// lineWriter appends what a json.Encoder writes, one value a write,
// without the newline it ends each value with.
type lineWriter struct{ buf []byte }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, bytes.TrimSuffix(p, []byte("\n"))...)
	return len(p), nil
}
