package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/config"
	"switchyard/gateway"
	"switchyard/providers"
)

// quietRedis drops go-redis's own log lines (a refused dial on a loaded
// machine prints one per connection); the gateway reports Redis trouble
// through switchyard_redis_up and its fallbacks.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quietRedis{}) }

// redisServer is a redis-server child process on a free loopback port,
// started for the run and killed (by its own PID) at the end.
type redisServer struct {
	cmd  *exec.Cmd
	addr string
}

// startRedis runs redis-server without persistence and waits, bounded, for
// it to accept connections.
func startRedis() (*redisServer, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, errors.New("redis-server is not installed (apt-get install redis-server), or pass -redis URL")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	s := &redisServer{cmd: cmd, addr: "127.0.0.1:" + strconv.Itoa(port)}
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", s.addr, 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("redis-server did not accept connections within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *redisServer) url() string { return "redis://" + s.addr + "/0" }

func (s *redisServer) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// cluster is N gateway replicas in process, behind a round-robin balancer
// (what nginx does in front of bench/cluster.sh), sharing one Redis when
// redisURL is set. Each replica has its own router: scoring state, cooldowns
// and probes are per node (SPEC 9), so every replica rediscovers a
// recovered deployment on its own.
type cluster struct {
	nodes []*gateway.Node
	hs    []http.Handler
	next  atomic.Uint64
}

var runSeq atomic.Int64

// newCluster assembles n replicas from yaml. With redisURL every replica
// gets it and a key prefix of its own run, so no run reads another's catalog.
func newCluster(yaml string, n int, redisURL string) (*cluster, error) {
	if redisURL != "" {
		yaml += fmt.Sprintf("redis: {url: %q, key_prefix: \"brownout:%d:%d:\"}\n", redisURL, time.Now().UnixNano(), runSeq.Add(1))
	}
	cfg, err := config.Load([]byte(yaml), nil)
	if err != nil {
		return nil, err
	}
	c := &cluster{}
	for i := range n {
		node, err := gateway.Assemble(cfg, gateway.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: int64(7 + i)})
		if err != nil {
			c.close()
			return nil, err
		}
		c.nodes = append(c.nodes, node)
		c.hs = append(c.hs, node.Handler())
	}
	return c, nil
}

// handler returns the replica the next request goes to.
func (c *cluster) handler() http.Handler {
	return c.hs[(c.next.Add(1)-1)%uint64(len(c.hs))]
}

// tune changes a simulated provider's profile on every replica (each has
// its own adapter): the upstream changing, as all replicas see it.
func (c *cluster) tune(provider string, f func(*config.Simulate)) error {
	for _, n := range c.nodes {
		t, ok := n.Adapters[provider].(providers.Tunable)
		if !ok {
			return fmt.Errorf("provider %s is not a tunable simulated adapter", provider)
		}
		p := t.Profile()
		f(&p)
		t.SetProfile(p)
	}
	return nil
}

// counter sums a counter family over every replica, by the value of label
// (all series under "" when label is "").
func (c *cluster) counter(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, n := range c.nodes {
		mfs, _ := n.Registry.Gather()
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				key := ""
				var parts []string
				for _, l := range m.GetLabel() {
					parts = append(parts, l.GetName()+"="+l.GetValue())
					if l.GetName() == label {
						key = l.GetValue()
					}
				}
				if label == "*" {
					key = strings.Join(parts, ",")
				}
				out[key] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func (c *cluster) close() {
	for _, n := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = n.Close(ctx)
		cancel()
	}
}
