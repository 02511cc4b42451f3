package database

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// limited is a source.Source that holds one slot of a shared budget for
// every call in flight and for every reader until it is released, so that
// however many tables and partitions run, no more than the budget's size
// of source operations (each on at most one connection) are open at once.
// A caller waiting for a slot gives up when its context ends.
//
// package snapshot never calls the source while it holds a reader of it,
// so a goroutine holds at most one slot and the budget cannot deadlock.
type limited struct {
	src   source.Source
	slots chan struct{}
}

var _ source.Source = (*limited)(nil)

func newLimited(src source.Source, n int) *limited {
	return &limited{src: src, slots: make(chan struct{}, n)}
}

// acquire takes a slot, or returns ctx's error.
func (l *limited) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for a source connection: %w", ctx.Err())
	}
}

func (l *limited) release() { <-l.slots }

// CaptureInstance implements source.Source.
func (l *limited) CaptureInstance(ctx context.Context, name string) (*source.CaptureInstance, error) {
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	defer l.release()
	return l.src.CaptureInstance(ctx, name)
}

// MaxLSN implements source.Source.
func (l *limited) MaxLSN(ctx context.Context) (lsn.LSN, error) {
	if err := l.acquire(ctx); err != nil {
		return lsn.LSN{}, err
	}
	defer l.release()
	return l.src.MaxLSN(ctx)
}

// MinLSN implements source.Source.
func (l *limited) MinLSN(ctx context.Context, ci string) (lsn.LSN, bool, error) {
	if err := l.acquire(ctx); err != nil {
		return lsn.LSN{}, false, err
	}
	defer l.release()
	return l.src.MinLSN(ctx, ci)
}

// LSNTime implements source.Source.
func (l *limited) LSNTime(ctx context.Context, at lsn.LSN) (time.Time, error) {
	if err := l.acquire(ctx); err != nil {
		return time.Time{}, err
	}
	defer l.release()
	return l.src.LSNTime(ctx, at)
}

// IntKeyBounds implements source.Source.
func (l *limited) IntKeyBounds(ctx context.Context, ci *source.CaptureInstance) (lo, hi int64, ok bool, err error) {
	if err := l.acquire(ctx); err != nil {
		return 0, 0, false, err
	}
	defer l.release()
	return l.src.IntKeyBounds(ctx, ci)
}

// RowCount implements source.Source.
func (l *limited) RowCount(ctx context.Context, ci *source.CaptureInstance) (int64, error) {
	if err := l.acquire(ctx); err != nil {
		return 0, err
	}
	defer l.release()
	return l.src.RowCount(ctx, ci)
}

// SeekKey implements source.Source.
func (l *limited) SeekKey(ctx context.Context, ci *source.CaptureInstance, iso source.Isolation, from keyrange.Tuple, k int64) (keyrange.Tuple, bool, error) {
	if err := l.acquire(ctx); err != nil {
		return nil, false, err
	}
	defer l.release()
	return l.src.SeekKey(ctx, ci, iso, from, k)
}

// ReadRange implements source.Source: the slot is held until the reader is
// released.
func (l *limited) ReadRange(ctx context.Context, ci *source.CaptureInstance, r keyrange.Range, opts source.ReadOptions) (array.RecordReader, error) {
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	rr, err := l.src.ReadRange(ctx, ci, r, opts)
	if err != nil {
		l.release()
		return nil, err
	}
	return &slotReader{RecordReader: rr, release: l.release, refs: 1}, nil
}

// ReadChanges implements source.Source: the slot is held until the reader
// is released.
func (l *limited) ReadChanges(ctx context.Context, ci *source.CaptureInstance, from, to lsn.LSN) (array.RecordReader, error) {
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	rr, err := l.src.ReadChanges(ctx, ci, from, to)
	if err != nil {
		l.release()
		return nil, err
	}
	return &slotReader{RecordReader: rr, release: l.release, refs: 1}, nil
}

// list calls lister under a slot.
func (l *limited) list(ctx context.Context, lister Lister) ([]source.CaptureInstance, error) {
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	defer l.release()
	return lister.ListCaptureInstances(ctx)
}

// slotReader frees its slot when its last reference is released. It keeps
// its own count: the source's reader is released once, with it.
type slotReader struct {
	array.RecordReader
	release func()
	mu      sync.Mutex
	refs    int
}

// Retain implements array.RecordReader.
func (r *slotReader) Retain() {
	r.mu.Lock()
	r.refs++
	r.mu.Unlock()
}

// Release implements array.RecordReader.
func (r *slotReader) Release() {
	r.mu.Lock()
	r.refs--
	last := r.refs == 0
	r.mu.Unlock()
	if last {
		r.RecordReader.Release()
		r.release()
	}
}
