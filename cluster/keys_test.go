package cluster

import (
	"strings"
	"testing"
)

// TestSlot checks the CRC16 slot function against values printed by a real
// Redis (CLUSTER KEYSLOT) and the hash-tag rules of the Cluster spec.
func TestSlot(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want int
	}{
		{"123456789", 12739}, // CRC16/XMODEM check value 0x31C3
		{"foo", 12182},
		{"bar", 5061},
		{"somekey", 11058},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"user1000", 3443},
		{"foo{{bar}}zap", 4015},
	} {
		if got := Slot(tc.key); got != tc.want {
			t.Errorf("Slot(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
	// Tag rules: first '{' to the first '}' after it; an empty tag hashes the whole key.
	for _, tc := range [][2]string{
		{"foo{bar}zap", "bar"},
		{"foo{{bar}}zap", "{bar"},
		{"foo{bar}{zap}", "bar"},
	} {
		if Slot(tc[0]) != Slot(tc[1]) {
			t.Errorf("Slot(%q) != Slot(%q)", tc[0], tc[1])
		}
	}
	if got := Slot("foo{}{bar}"); got != 8363 { // value from a real Redis
		t.Errorf("empty tag: Slot = %d, want 8363", got)
	}
}

// TestKeysShareTag is the hash-tag rule: every key of one team (or one
// deployment) lands in the same slot, whatever the name, and different
// teams are spread.
func TestKeysShareTag(t *testing.T) {
	for _, team := range []string{"acme", "a b", "ünï", "x:y", "{odd}", "a}b", ""} {
		first := Slot(TeamKey("switchyard:", team, "rpm"))
		for _, name := range []string{"tpm", "par", "budget", "applied:node1"} {
			if s := Slot(TeamKey("switchyard:", team, name)); s != first {
				t.Errorf("team %q: %s in slot %d, rpm in %d", team, name, s, first)
			}
		}
	}
	if k := TeamKey("switchyard:", "acme", "rpm"); k != "switchyard:{team:acme}:rpm" {
		t.Errorf("TeamKey = %q", k)
	}
	if k := DeploymentKey("sy:", "mini", "usage"); !strings.HasPrefix(k, "sy:{dep:mini}") {
		t.Errorf("DeploymentKey = %q", k)
	}
	slots := map[int]bool{}
	for i := range 64 {
		slots[Slot(TeamKey("switchyard:", string(rune('a'+i%26))+string(rune('a'+i/26)), "rpm"))] = true
	}
	if len(slots) < 32 {
		t.Errorf("64 teams in only %d slots: the tag does not include the team", len(slots))
	}
}
