package catalog

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseKey: any config key entry parses without panicking; a sha256:
// entry that parses names exactly the digest its hex spells, in any case.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"", "sk-test", "sha256:", "sha256:zz", "sha256:" + strings.Repeat("aB", 32), "sha256:" + strings.Repeat("0", 63)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		d, ok := ParseKey(k)
		if hexed, found := strings.CutPrefix(k, "sha256:"); found && ok {
			if hex.EncodeToString(d[:]) != strings.ToLower(hexed) {
				t.Fatalf("%q parsed to %x", k, d)
			}
		}
		if !found(k) && k != "" && (!ok || d != HashKey(k)) {
			t.Fatalf("clear key %q must hash", k)
		}
	})
}

func found(k string) bool { return strings.HasPrefix(k, "sha256:") }

// FuzzDuration: a budget period in JSON either fails with a message or
// round-trips.
func FuzzDuration(f *testing.F) {
	for _, s := range []string{`"720h"`, `"1h30m"`, `5`, `"x"`, `null`, `"-1s"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var d Duration
		if json.Unmarshal([]byte(in), &d) != nil {
			return
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || back != d {
			t.Fatalf("%s -> %s -> %v (%v)", in, b, back, err)
		}
	})
}
