package telemetry

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// countingWriter records each write it gets.
type countingWriter struct {
	mu     sync.Mutex
	writes []string
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, string(p))
	return len(p), nil
}

func (c *countingWriter) all() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.writes, "")
}

// manualTimer holds the scheduled flushes until the test fires them.
type manualTimer struct {
	mu  sync.Mutex
	fns []func()
}

func (m *manualTimer) after(_ time.Duration, f func()) {
	m.mu.Lock()
	m.fns = append(m.fns, f)
	m.mu.Unlock()
}

func (m *manualTimer) fire() int {
	m.mu.Lock()
	fns := m.fns
	m.fns = nil
	m.mu.Unlock()
	for _, f := range fns {
		f()
	}
	return len(fns)
}

func TestLogWriterBatches(t *testing.T) {
	out := &countingWriter{}
	tm := &manualTimer{}
	w := NewLogWriter(out, 100, time.Second)
	w.after = tm.after
	for i := range 3 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	if len(out.writes) != 0 {
		t.Fatalf("lines written before their batch was due: %q", out.writes)
	}
	if n := tm.fire(); n != 1 {
		t.Fatalf("%d flushes scheduled for one batch, want 1", n)
	}
	if got := out.all(); got != "line 0\nline 1\nline 2\n" || len(out.writes) != 1 {
		t.Fatalf("timed flush wrote %q in %d writes, want the three lines in one", out.writes, len(out.writes))
	}
	// the next line schedules a new flush
	fmt.Fprintf(w, "line 3\n")
	if n := tm.fire(); n != 1 || len(out.writes) != 2 {
		t.Fatalf("second batch: %d flushes, %d writes", n, len(out.writes))
	}
	// a full batch goes out at once, without the timer
	long := strings.Repeat("x", 120) + "\n"
	fmt.Fprint(w, long)
	if len(out.writes) != 3 || out.writes[2] != long {
		t.Fatalf("a batch past its size was not written at once: %d writes", len(out.writes))
	}
	fmt.Fprint(w, "tail\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.all(), "tail\n") {
		t.Fatalf("Close did not flush: %q", out.all())
	}
	fmt.Fprint(w, "after close\n")
	if !strings.HasSuffix(out.all(), "after close\n") {
		t.Fatal("a line after Close was not written through")
	}
	tm.fire() // a stale timer after Close writes nothing twice
	if strings.Count(out.all(), "tail\n") != 1 {
		t.Fatalf("a line was written twice: %q", out.all())
	}
}

// TestLogWriterKeepsEveryLineInOrder: concurrent loggers, size and timed
// flushes racing; every line comes out once, each writer's in order.
func TestLogWriterKeepsEveryLineInOrder(t *testing.T) {
	out := &countingWriter{}
	tm := &manualTimer{}
	w := NewLogWriter(out, 256, time.Second)
	w.after = tm.after
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() { // the timer, firing while lines arrive
		for {
			select {
			case <-stop:
				return
			default:
				tm.fire()
			}
		}
	}()
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				fmt.Fprintf(w, "g%d %d\n", g, i)
			}
		})
	}
	wg.Wait()
	close(stop)
	_ = w.Close()
	next := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(out.all(), "\n"), "\n") {
		var g string
		var i int
		if _, err := fmt.Sscanf(l, "%s %d", &g, &i); err != nil {
			t.Fatalf("torn line %q", l)
		}
		if i != next[g] {
			t.Fatalf("%s: line %d after %d", g, i, next[g]-1)
		}
		next[g]++
	}
	for g := range 4 {
		if n := next[fmt.Sprintf("g%d", g)]; n != 500 {
			t.Fatalf("g%d: %d lines of 500", g, n)
		}
	}
	if len(out.writes) >= 2000 {
		t.Fatalf("%d writes for 2000 lines: nothing was batched", len(out.writes))
	}
}

func TestLogWriterRealTimer(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	w := NewLogWriter(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), 1<<20, time.Millisecond)
	fmt.Fprint(w, "hello\n")
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := buf.String()
		mu.Unlock()
		if got == "hello\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the line never came out: %q", got)
		}
		time.Sleep(time.Millisecond)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
