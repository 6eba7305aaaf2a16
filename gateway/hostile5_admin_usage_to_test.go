package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestHostile5AdminUsageOldTo: GET /admin/usage names the parameter at
// fault in every 400 (SPEC 11: "a message naming the field"). A `to` older
// than the 90 days usage is kept (SPEC 3.1), sent alone, was answered
// "from: <date> is after to" naming `from`, which the client never sent.
func TestHostile5AdminUsageOldTo(t *testing.T) {
	n := newTestNode(t, levelsYAML)
	old := time.Now().UTC().AddDate(0, 0, -200).Format(time.DateOnly)
	w := do(t, n.Handler(), "GET", "/admin/usage?to="+old, adminKey, "")
	var e struct {
		Error struct{ Param, Message string }
	}
	_ = json.Unmarshal(w.Body.Bytes(), &e)
	if w.Code != 400 || e.Error.Param != "to" || !strings.Contains(e.Error.Message, "90 days") {
		t.Fatalf("%d %s, want 400 naming to and the 90 days kept", w.Code, w.Body)
	}
	// within retention, to alone still works
	recent := time.Now().UTC().AddDate(0, 0, -80).Format(time.DateOnly)
	if w := do(t, n.Handler(), "GET", "/admin/usage?to="+recent, adminKey, ""); w.Code != 200 {
		t.Fatalf("to=%s: %d %s", recent, w.Code, w.Body)
	}
}
