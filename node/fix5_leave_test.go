package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// TestCloseLeavesTheHeartbeat: Close takes the node out of the live set
// before it closes its Redis client. The heartbeat's leave runs when its
// loop sees the cancelled context; a Close that closed the client without
// waiting for it lost the leave to "client is closed", and the node was
// counted live (in /admin/cluster and in the fallback divisor of
// expected_replicas: 0) for three more intervals.
func TestCloseLeavesTheHeartbeat(t *testing.T) {
	m := miniredis.RunT(t)
	const seen = "sytest:{nodes}:seen"
	for i := range 5 { // the race lost the leave most of the time; each round must win it
		t.Run(fmt.Sprintf("round %d", i), func(t *testing.T) {
			m.FlushAll()
			yml := strings.NewReplacer("${REDIS}", "redis://"+m.Addr()+"/0", "${NODE}", fmt.Sprintf("leave-%d", i), "${TIMEOUT}", "2s").Replace(clusterYAML)
			n := assemble(t, yml, 1)
			deadline := time.Now().Add(10 * time.Second)
			for { // the first beat is sent as the heartbeat starts
				if members, _ := m.ZMembers(seen); len(members) == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the node never announced itself")
				}
				time.Sleep(5 * time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := n.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if members, _ := m.ZMembers(seen); len(members) != 0 {
				t.Fatalf("after Close the node is still in the live set: %v", members)
			}
		})
	}
}
