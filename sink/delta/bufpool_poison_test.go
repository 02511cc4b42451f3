//go:build cdcsnap_poison

package delta

import "testing"

// TestBufferPoolPoisonFindsWriteAfterFree checks that poison builds catch
// what they are for: a write to a buffer after it was freed.
func TestBufferPoolPoisonFindsWriteAfterFree(t *testing.T) {
	p := newBufferPool(poolHeldBytes)
	b := p.Allocate(minPooled)
	p.Free(b)
	if err := p.check(); err != nil {
		t.Fatalf("before the stray write: %v", err)
	}
	b[100] = 1 // the holder keeps writing after Free
	c := p.Allocate(minPooled)
	if c[100] != 0 {
		t.Fatal("the reused buffer was not zeroed")
	}
	if err := p.check(); err == nil {
		t.Fatal("a write after Free went unnoticed")
	}
}
