package cache

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"switchyard/catalog"
	"switchyard/internal/agentturn"
	"switchyard/wire"
)

func TestCanonMemoBounded(t *testing.T) {
	m := &canonMemo[[]byte]{maxBytes: 4096, size: func(b []byte) int { return len(b) }}
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

// TestToolsMemoIsRead: tools answered from the memo are the tools the
// readers give, for each format, and a tools array that differs in one
// byte is read again.
func TestToolsMemoIsRead(t *testing.T) {
	for _, c := range []struct {
		name string
		r    keyReq
	}{{"openai", oa(agentturn.OpenAI())}, {"anthropic", an(agentturn.Anthropic())}, {"responses", rs(agentturn.Responses())}} {
		other := keyReq{c.r.op, c.r.format, strings.Replace(c.r.body, "Tool number 3 ", "Tool number 9 ", 1)}
		for range 2 {
			for _, r := range []keyReq{c.r, other} {
				got, err := KeyOf(r.op, r.format, []byte(r.body), "t", "")
				if err != nil {
					t.Fatal(err)
				}
				if want := keyWithoutMemo(t, r); got != want {
					t.Fatalf("%s: the key with the memo differs from the key read afresh", c.name)
				}
				// the digest the memo keeps is the one a key computes without it
				canon, err := Parse(r.op, r.format, []byte(r.body))
				if err != nil || canon.toolsSum == nil {
					t.Fatalf("%s: the tools were not memoized (%v)", c.name, err)
				}
				bare := *canon
				bare.toolsSum = nil
				if bare.Key("t", "") != got {
					t.Fatalf("%s: the key with the memo's digest differs from the key hashing the tools", c.name)
				}
			}
		}
		if mustKey(t, c.r, "t", "") == mustKey(t, other, "t", "") {
			t.Fatalf("%s: two different tool sets share a key", c.name)
		}
	}
}

// keyWithoutMemo is r's key with every memo emptied first.
func keyWithoutMemo(t *testing.T, r keyReq) Key {
	t.Helper()
	for _, m := range []*canonMemo[*toolSet]{oaToolset, anToolset, rsToolset} {
		m.mu.Lock()
		m.cur, m.prev, m.curBytes = nil, nil, 0
		m.mu.Unlock()
	}
	schemas.mu.Lock()
	schemas.cur, schemas.prev, schemas.curBytes = nil, nil, 0
	schemas.mu.Unlock()
	return mustKey(t, r, "t", "")
}

// TestArgsMemoByTeam: canonical tool-call arguments are remembered under
// the team that sent them, so one team's key never reads faster for what
// another team sent.
func TestArgsMemoByTeam(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"1","function":{"name":"f","arguments":"{\"memo\": \"by team\"}"}}]}]}`)
	req, err := wire.ParseLimited(body, catalog.OpChat, wire.FormatOpenAI, wire.Limits{MaxMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	held := func(team string) bool {
		k := append([]byte(team+"\x00o"), `"{\"memo\": \"by team\"}"`...)
		_, ok := argsMemo.get(k)
		return ok
	}
	if _, err := ParseRequest(req, "a"); err != nil {
		t.Fatal(err)
	}
	if !held("a") || held("b") {
		t.Fatalf("after team a's request: held for a %v, for b %v; want only a", held("a"), held("b"))
	}
	ka, _ := ParseRequest(req, "a")
	kb, _ := ParseRequest(req, "b")
	if !held("b") || ka.Key("t", "") != kb.Key("t", "") {
		t.Fatal("team b's request did not read the arguments itself, or read them otherwise")
	}
}
