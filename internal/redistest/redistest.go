// Package redistest runs a real redis-server on a free loopback port for
// tests that need the real thing (cluster exactness, faults, slot rules).
// It skips the calling test with a clear message when the binary is absent.
package redistest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server child process that can be killed and restarted
// on the same port, as a crash and a recovery would.
type Server struct {
	t     testing.TB
	port  int
	extra []string
	cmd   *exec.Cmd
	adm   *redis.Client // harness queries (cluster.go); used from the test goroutine only
}

// Start runs redis-server with any extra arguments (skipping t when it is
// not installed) and stops it when the test ends.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed: skipping the real-Redis test (apt-get install redis-server; .ci/run installs it)")
	}
	s := &Server{t: t, port: freePort(t, false), extra: extra}
	s.Restart()
	t.Cleanup(s.Kill)
	return s
}

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is the redis:// URL of the server.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Restart starts the server (again) and waits, bounded, until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--loglevel", "warning"}, s.extra...)
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			s.t.Fatal("redis-server did not answer PING within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Signal sends sig to the server (SIGSTOP and SIGCONT make a hung Redis).
func (s *Server) Signal(sig os.Signal) {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Kill stops the server at once (SIGKILL).
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Client returns a plain client for assertions, closed with the test.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// freePort returns a loopback port nobody listens on; withBus also wants
// port+10000 free (a Cluster node's bus port).
func freePort(t testing.TB, withBus bool) int {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if !withBus {
			return port
		}
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		_ = bus.Close()
		return port
	}
	t.Fatal("no free port pair for a Redis Cluster node")
	return 0
}

// QuietLogs silences go-redis's own log lines (dial failures), which fault
// tests provoke by the hundred; call it from TestMain.
func QuietLogs() { redis.SetLogger(quietLogger{}) }

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
