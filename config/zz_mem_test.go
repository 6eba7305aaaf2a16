package config

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestZZMem(t *testing.T) {
	raw, err := os.ReadFile("/tmp/mem/gwl.yaml")
	if err != nil {
		t.Skip()
	}
	var peak uint64
	done := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak {
				peak = ms.HeapInuse
			}
		}
	}()
	t0 := time.Now()
	cfg, err := Load(raw, nil)
	close(done)
	if err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("load %v peak inuse %d MB, total alloc %d MB, live after %d MB keys %d", time.Since(t0), peak>>20, ms.TotalAlloc>>20, ms.HeapAlloc>>20, len(cfg.Teams[0].Keys))
}
