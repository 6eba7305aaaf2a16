package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// ErrConflict is returned by Store.Save when the stored version is not the
// one the change was based on (another writer got there first).
var ErrConflict = errors.New("catalog changed concurrently")

// ErrUnavailable is returned when the store cannot be reached; admin writes
// answer 503 and change nothing (SPEC 9).
var ErrUnavailable = errors.New("catalog store unavailable")

// Store persists the admin-managed State (SPEC 11). The config file seeds
// it once; afterwards the store is the truth.
type Store interface {
	// Load returns the stored state, or ok=false when nothing is stored yet.
	Load(ctx context.Context) (st *State, ok bool, err error)
	// Save stores next if the stored version still equals base (compare and
	// set), atomically: a reader sees the old state or the new one.
	Save(ctx context.Context, base int64, next *State) error
}

// MemoryStore keeps the state in memory only (the demo's store).
type MemoryStore struct {
	mu sync.Mutex
	st *State // guarded by mu
}

// Load implements Store.
func (m *MemoryStore) Load(context.Context) (*State, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		return nil, false, nil
	}
	return m.st.Clone(), true, nil
}

// Save implements Store. It keeps next itself, not a copy: a State is
// never changed once saved (every transition works on a Clone), and with
// 100,000 keys a copy is 16 MB the node would hold twice.
func (m *MemoryStore) Save(_ context.Context, base int64, next *State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st != nil && m.st.Version != base {
		return ErrConflict
	}
	m.st = next
	return nil
}

// FileStore keeps the state in a JSON file under data_dir, written
// atomically: temp file, fsync, rename, fsync of the directory.
type FileStore struct {
	path string
	mu   sync.Mutex // serializes writers in this process
}

// NewFileStore returns a store at dir/catalog.json, creating dir.
func NewFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating data_dir %s: %w", dir, err)
	}
	return &FileStore{path: filepath.Join(dir, "catalog.json")}, nil
}

// indentBelow is the size under which the state file is written indented.
const indentBelow = 1 << 20

// version reads the stored state's version alone: the decoder skips the
// rest of the file without building it.
func (f *FileStore) version() (int64, bool, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading %s: %w", f.path, err)
	}
	var v struct {
		Version int64 `json:"version"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, false, fmt.Errorf("state file %s is corrupt (%v): fix or remove it to reseed from the config", f.path, err)
	}
	return v.Version, true, nil
}

// Load implements Store.
func (f *FileStore) Load(context.Context) (*State, bool, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading %s: %w", f.path, err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, false, fmt.Errorf("state file %s is corrupt (%v): fix or remove it to reseed from the config", f.path, err)
	}
	st.pack()
	return &st, true, nil
}

// Save implements Store.
func (f *FileStore) Save(ctx context.Context, base int64, next *State) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok, err := f.version(); err != nil {
		return err
	} else if ok && cur != base {
		return ErrConflict
	}
	// compact, built in one buffer (encodeState): with 100,000 keys an
	// indented json.Marshal was a 38 MB file and over 100 MB in flight at
	// the start that seeds it; a small state stays indented for a reader
	b, err := encodeState(next, 0)
	if err != nil {
		return err
	}
	if len(b) < indentBelow {
		var ind bytes.Buffer
		if json.Indent(&ind, b, "", "  ") == nil {
			b = ind.Bytes()
		}
	}
	dir := filepath.Dir(f.path)
	tmp, err := os.CreateTemp(dir, ".catalog-*.json")
	if err != nil {
		return fmt.Errorf("writing state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("writing state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("syncing state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		return fmt.Errorf("publishing state: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

var (
	_ Store = (*MemoryStore)(nil)
	_ Store = (*FileStore)(nil)
)
