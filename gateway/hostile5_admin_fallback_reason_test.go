package gateway

import "testing"

// TestHostile5AdminDeleteFallbackBadReason: SPEC 11 says a chain's reason
// "must be one of the three" (general, context_window, content_policy) and
// that validation errors are 400/409/422 naming the field. DELETE
// /admin/fallbacks?reason=<not a reason> answered 404 naming primaryModel,
// as if the chain were merely absent, hiding the typo from the operator.
func TestHostile5AdminDeleteFallbackBadReason(t *testing.T) {
	n := adminNode(t, nil)
	for _, tc := range []struct {
		query  string
		status int
		field  string
	}{
		{"primaryModel=a&reason=contextwindow", 400, "reason"},
		{"primaryModel=a&reason=General", 400, "reason"},
		{"primaryModel=a&reason=context_window", 404, "primaryModel"}, // a valid reason, no such chain
		{"primaryModel=zz", 404, "primaryModel"},
	} {
		w := adm(t, n, "DELETE", "/admin/fallbacks?"+tc.query, "")
		wantErr(t, w, tc.status, tc.field)
		if got := fallbacks(t, n); len(got) != 1 {
			t.Fatalf("%s: the chain a/general is gone: %+v", tc.query, got)
		}
	}
	if w := adm(t, n, "DELETE", "/admin/fallbacks?primaryModel=a&reason=general", ""); w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}
