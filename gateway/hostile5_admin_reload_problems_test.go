package gateway

import (
	"strings"
	"testing"
)

// TestHostile5ReloadListsEveryProblem: a reload that fails is rejected
// "with every problem logged" (SPEC 11), and POST /admin/reload answers
// 422 with them, so the operator fixes the file in one pass. A file that
// both drops a provider a stored deployment uses and adds a provider whose
// adapter cannot be built (a vertex credentials_file that does not exist)
// reported only the first kind.
func TestHostile5ReloadListsEveryProblem(t *testing.T) {
	n, path, _ := reloadNode(t, reloadYAML)
	yml := strings.Replace(reloadYAML,
		"  - {name: slow, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 20, output_tokens: 10}}\n",
		"  - {name: gcp, kind: vertex, project: p, region: us-central1, credentials_file: /nonexistent/switchyard-hostile5.json}\n", 1)
	yml = strings.Replace(yml, "  - {id: s1, model: slow, provider: slow}\n", "", 1)
	yml = strings.Replace(yml, "hard: slow", "hard: a", 1)
	rewrite(t, path, yml)
	w := adm(t, n, "POST", "/admin/reload", "")
	if w.Code != 422 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var out struct{ Report ReloadReport }
	decodeJSON(t, w, &out)
	var removed, adapter bool
	for _, p := range out.Report.Problems {
		removed = removed || strings.Contains(p, `"slow"`)
		adapter = adapter || strings.Contains(p, "gcp")
	}
	if !removed || !adapter {
		t.Fatalf("want both the removed provider and the adapter that cannot be built, got %q", out.Report.Problems)
	}
}
