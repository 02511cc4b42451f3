package delta

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// minPooled is the smallest buffer a bufferPool keeps for reuse; smaller
// ones come from Go's allocator and go back to the garbage collector.
const minPooled = 64 << 10

// poolHeldBytes bounds what one partition write's bufferPool keeps: a
// buffered row group of parquetprops.RowGroupBytes (8 MiB compressed) is
// a few column buffers, each grown by doubling.
const poolHeldBytes = 32 << 20

// poisonByte fills freed buffers in poison builds (bufpool_poison.go).
const poisonByte = 0xA5

// bufferPool is the memory.Allocator of one partition write's Parquet
// writers. Writing a buffered row group grows each column's in-memory
// buffer by doubling (arrow-go v18.9.0 encoding.BufferWriter.Reserve) and
// drops it when the row group is flushed, so Go's allocator hands out and
// zeroes several new large buffers per row group and the garbage collector
// runs for them: 8.6 % of sink/delta's CPU at 10M rows (BENCHMARKS.md as
// of c607b66, which brought the pool). The pool takes buffers that arrow-go
// frees back and hands them out again, by power-of-two class (arrow-go
// asks for powers of two, so every growth moves to a new buffer; the
// saving is that the new one is a reused one).
//
// It keeps arrow-go's allocator contract as Go's and the C allocator have
// it (memory.GoAllocator, mallocator.Mallocator): every byte handed out
// beyond what the caller already owned is zero, whether from Allocate or
// from Reallocate growing in place. A buffer is reused only if Allocate or
// Reallocate made it and it was freed exactly once since: a second Free,
// or a Free of a slice that does not start where the buffer did, leaves it
// to the garbage collector. A buffer arrow-go never frees (its error
// paths) stays referenced until the pool is dropped at the end of the
// partition write. Safe for concurrent use.
type bufferPool struct {
	base memory.Allocator // Go's: buffers the pool drops are the GC's

	mu   sync.Mutex
	free map[int][][]byte // freed buffers by capacity (a power of two)
	live map[*byte]int    // pooled buffers handed out: first byte → capacity
	held int              // bytes in free
	max  int              // bound on held
	err  error            // poison builds: a freed buffer was written to
}

func newBufferPool(maxHeld int) *bufferPool {
	return &bufferPool{base: memory.NewGoAllocator(), free: map[int][][]byte{}, live: map[*byte]int{}, max: maxHeld}
}

var _ memory.Allocator = (*bufferPool)(nil)

// class is the capacity a pooled buffer of size bytes gets.
func class(size int) int { return 1 << bits.Len(uint(size-1)) }

// Allocate returns size zero bytes.
func (p *bufferPool) Allocate(size int) []byte { return p.take(size, 0) }

// take returns size bytes of which all but the first keep are zero: keep
// bytes are the caller's to overwrite (Reallocate's copy), so a reused
// buffer is cleared only beyond them.
func (p *bufferPool) take(size, keep int) []byte {
	if size < minPooled {
		return p.base.Allocate(size)
	}
	c := class(size)
	p.mu.Lock()
	defer p.mu.Unlock()
	var b []byte
	if l := p.free[c]; len(l) > 0 {
		b = l[len(l)-1][:c]
		l[len(l)-1] = nil
		p.free[c] = l[:len(l)-1]
		p.held -= c
		if poison {
			p.checkPoison(b)
		}
		clear(b[min(keep, size):size])
	} else {
		b = p.base.Allocate(c) // zeroed
	}
	p.live[unsafe.SliceData(b)] = c
	return b[:size]
}

// Reallocate returns b resized to size: the first min(len(b), size) bytes
// are b's, the rest zero. b is freed if it moved.
func (p *bufferPool) Reallocate(size int, b []byte) []byte {
	if cap(b) >= size {
		if size > len(b) {
			clear(b[len(b):size])
		}
		return b[:size]
	}
	nb := p.take(size, len(b))
	copy(nb, b)
	p.Free(b)
	return nb
}

// Free takes back a buffer Allocate or Reallocate returned.
func (p *bufferPool) Free(b []byte) {
	if cap(b) < minPooled {
		return
	}
	ptr := unsafe.SliceData(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.live[ptr]
	if !ok {
		return // not ours, freed twice, or a sub-slice: the GC's
	}
	delete(p.live, ptr)
	if p.held+c > p.max {
		return
	}
	b = b[:c]
	if poison {
		for i := range b {
			b[i] = poisonByte
		}
	}
	p.free[c] = append(p.free[c], b)
	p.held += c
}

// checkPoison records an error if a freed buffer was written to (poison
// builds only; p.mu held).
func (p *bufferPool) checkPoison(b []byte) {
	for i, v := range b {
		if v != poisonByte {
			p.err = errors.Join(p.err, fmt.Errorf("delta: buffer pool: byte %d of a freed %d-byte buffer was written after Free", i, len(b)))
			return
		}
	}
}

// check returns what poison builds found wrong.
func (p *bufferPool) check() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}
