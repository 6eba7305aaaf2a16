package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Memory limits (server.memory_limit): the Go runtime's soft limit, which
// makes the collector work harder as the process nears it instead of
// letting the heap grow to twice what is live. A node with a large,
// steady live heap (100,000 keys, SPEC 16) otherwise holds about twice
// that in RSS.
const (
	MemoryLimitAuto = "auto" // 90% of the container's (cgroup) memory limit, none without one
	MemoryLimitOff  = "off"  // no soft limit (GOGC alone)
)

// DefaultGCPercent is server.gc_percent's default (the collector's GOGC):
// Go's own. 70 kept a node with 10,000 teams or 100,000 keys under 150 MB
// RSS (SPEC 16) but cost it 7-10% of its throughput against one team
// (bench/overhead.sh -m -l, 2026-12-05): a choice for a node short of
// memory, not a default.
const DefaultGCPercent = 100

// autoShare is the part of a cgroup limit that "auto" gives the runtime;
// the rest is headroom for what the runtime does not count (binary pages,
// memory the kernel holds for the process).
const autoShare = 0.9

// ParseMemoryLimit reads server.memory_limit: "auto", "off", or a size in
// bytes with an optional unit (KiB, MiB, GiB, KB, MB, GB; "512MiB"). It
// returns the size (0 for "auto" and "off").
func ParseMemoryLimit(s string) (int64, error) {
	switch t := strings.TrimSpace(s); t {
	case MemoryLimitAuto, MemoryLimitOff, "":
		return 0, nil
	default:
		num, mult := t, int64(1)
		for _, u := range []struct {
			suffix string
			mult   int64
		}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}} {
			if strings.HasSuffix(t, u.suffix) {
				num, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
				break
			}
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n <= 0 || n > (1<<62)/mult {
			return 0, fmt.Errorf("%q is not auto, off or a positive size such as 512MiB", s)
		}
		if n*mult < 16<<20 {
			return 0, fmt.Errorf("%q is below 16MiB: the node could not start in it", s)
		}
		return n * mult, nil
	}
}

// MemoryLimit is the soft limit server.memory_limit asks for, in bytes (0:
// none), and where it came from ("config", "cgroup" or "" for none). root
// is where the cgroup file systems are mounted (/sys/fs/cgroup); "auto"
// reads the v2 memory.max or the v1 memory.limit_in_bytes there (inside a
// container that is the container's own limit).
func (s Server) MemoryLimit(root string) (int64, string) {
	switch strings.TrimSpace(s.MemoryLimitSpec) {
	case MemoryLimitOff:
		return 0, ""
	case MemoryLimitAuto, "":
		if n := cgroupMemoryLimit(root); n > 0 {
			return int64(float64(n) * autoShare), "cgroup"
		}
		return 0, ""
	}
	n, err := ParseMemoryLimit(s.MemoryLimitSpec)
	if err != nil {
		return 0, ""
	}
	return n, "config"
}

// cgroupMemoryLimit is the memory limit of the cgroup at root, 0 when it
// has none (v2 "max", v1's page-rounded maximum) or none can be read.
func cgroupMemoryLimit(root string) int64 {
	for _, f := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n >= 1<<60 { // v1 writes about 2^63 for "no limit"
			return 0
		}
		return n
	}
	return 0
}
