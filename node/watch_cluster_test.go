package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// TestClusterMissedChangeNoticeWithinASecond: a replica that missed a
// catalog change notice (pub/sub is at most once: a notice published while
// its subscription reconnects, after a failover or a network blip, is lost)
// still applies the change within a second (SPEC 11: a revoked key or a
// deleted team stops working on every replica within one second). The
// change is written to Redis as a save does, without its PUBLISH; the
// replicas learn of it only through their backstop poll, which used to run
// every 5 s.
func TestClusterMissedChangeNoticeWithinASecond(t *testing.T) {
	m := miniredis.RunT(t)
	var nodes []*Node
	var srvs []*httptest.Server
	for i := range 2 {
		yml := strings.NewReplacer("${REDIS}", "redis://"+m.Addr()+"/0", "${NODE}", fmt.Sprintf("watch-%d", i+1), "${TIMEOUT}", "2s").Replace(clusterYAML)
		n := assemble(t, yml, int64(i+1))
		srv := httptest.NewServer(n.Handler())
		t.Cleanup(func() {
			srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = n.Close(ctx)
		})
		nodes, srvs = append(nodes, n), append(srvs, srv)
	}
	if got := onePerNode(t, srvs, "sk-open"); got[0] != 200 || got[1] != 200 {
		t.Fatalf("before the change: %v", got)
	}

	// the next state, as an admin DELETE /admin/teams/open saves it
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, ok, err := nodes[0].Store().Load(ctx)
	if err != nil || !ok {
		t.Fatalf("loading the stored catalog: %v %v", ok, err)
	}
	kept := st.Teams[:0]
	for _, tm := range st.Teams {
		if tm.Name != "open" {
			kept = append(kept, tm)
		}
	}
	st.Teams = kept
	st.Version++
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	// written as the save script writes it, but its notice is lost
	if err := m.Set("sytest:{catalog}:state", string(b)); err != nil {
		t.Fatal(err)
	}
	if err := m.Set("sytest:{catalog}:version", fmt.Sprint(st.Version)); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, nodes, st.Version)
	if got := onePerNode(t, srvs, "sk-open"); got[0] != 401 || got[1] != 401 {
		t.Fatalf("a deleted team's key must be 401 on every replica within a second, notice or not: %v", got)
	}
}
