package localstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
)

// Mem is a store in memory, for mem:// tables. It is safe for concurrent
// use; its objects are gone with it.
type Mem struct {
	mu      sync.Mutex
	objects map[string][]byte
}

// NewMem returns an empty store.
func NewMem() *Mem { return &Mem{objects: map[string][]byte{}} }

func (m *Mem) get(op, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[key]
	if !ok {
		return nil, &fs.PathError{Op: op, Path: key, Err: fs.ErrNotExist}
	}
	return b, nil
}

// ReadAll returns a copy of the object.
func (m *Mem) ReadAll(_ context.Context, key string) ([]byte, error) {
	b, err := m.get("read", key)
	return bytes.Clone(b), err
}

// NewRangeReader reads length bytes of the object from offset.
func (m *Mem) NewRangeReader(_ context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	b, err := m.get("read", key)
	if err != nil {
		return nil, err
	}
	// Objects are never changed in place (a write replaces the slice).
	return io.NopCloser(io.NewSectionReader(bytes.NewReader(b), offset, length)), nil
}

// Size returns the object's size in bytes.
func (m *Mem) Size(_ context.Context, key string) (int64, error) {
	b, err := m.get("stat", key)
	return int64(len(b)), err
}

// List returns the keys under prefix up to the next "/", sorted, each
// folder once as its key up to and including that "/".
func (m *Mem) List(_ context.Context, prefix string) ([]string, error) {
	m.mu.Lock()
	seen := map[string]bool{}
	for k := range m.objects {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			k = prefix + rest[:i+1]
		}
		seen[k] = true
	}
	m.mu.Unlock()
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

// NewWriter buffers the object until Close stores it.
func (m *Mem) NewWriter(ctx context.Context, key string, ifNotExist bool) (io.WriteCloser, error) {
	return &memWriter{m: m, ctx: ctx, key: key, ifNotExist: ifNotExist}, nil
}

type memWriter struct {
	m          *Mem
	ctx        context.Context
	key        string
	ifNotExist bool
	buf        bytes.Buffer
	closed     bool
}

func (w *memWriter) Write(p []byte) (int, error) {
	if w.closed {
		return 0, fmt.Errorf("write to %s after Close: %w", w.key, fs.ErrClosed)
	}
	return w.buf.Write(p)
}

// Close stores the object, unless the write's context is done.
func (w *memWriter) Close() error {
	if w.closed {
		return fmt.Errorf("close of %s: %w", w.key, fs.ErrClosed)
	}
	w.closed = true
	if err := w.ctx.Err(); err != nil {
		return err
	}
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	if _, ok := w.m.objects[w.key]; ok && w.ifNotExist {
		return fmt.Errorf("%s already exists: %w", w.key, fs.ErrExist)
	}
	w.m.objects[w.key] = bytes.Clone(w.buf.Bytes())
	return nil
}

// Delete removes the object.
func (m *Mem) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[key]; !ok {
		return &fs.PathError{Op: "remove", Path: key, Err: fs.ErrNotExist}
	}
	delete(m.objects, key)
	return nil
}

// Close does nothing; the objects stay readable.
func (m *Mem) Close() error { return nil }
