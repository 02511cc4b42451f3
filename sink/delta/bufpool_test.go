package delta

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestBufferPoolModel drives a bufferPool with random Allocate, Reallocate
// and Free calls (including a second Free right after the first and frees
// of sub-slices, which arrow-go should not make but a pool must survive)
// and checks each step
// against a model of what the caller owns: every buffer the caller holds
// is disjoint from every other it holds (a reused buffer is never handed
// out twice), its bytes are the caller's writes or zero (new bytes are
// zero, growth keeps the prefix), and the pool holds at most its bound.
func TestBufferPoolModel(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		const maxHeld = 1 << 20
		p := newBufferPool(maxHeld)
		type held struct {
			b    []byte
			want []byte // the model: what the caller wrote, zero elsewhere
		}
		var live []*held
		size := func() int {
			switch rng.IntN(4) {
			case 0:
				return rng.IntN(minPooled) // Go's allocator
			default:
				return minPooled + rng.IntN(3*minPooled)
			}
		}
		for step := 0; step < 400; step++ {
			switch op := rng.IntN(10); {
			case op < 4 || len(live) == 0:
				n := size()
				b := p.Allocate(n)
				live = append(live, &held{b: b, want: make([]byte, n)})
			case op < 6:
				h := live[rng.IntN(len(live))]
				n := size()
				nb := p.Reallocate(n, h.b)
				w := make([]byte, n)
				copy(w, h.want)
				h.b, h.want = nb, w
			case op < 8:
				i := rng.IntN(len(live))
				h := live[i]
				live = append(live[:i], live[i+1:]...)
				dirty(h.b)
				if len(h.b) > 1 && rng.IntN(8) == 0 {
					p.Free(h.b[1:]) // a sub-slice: must be left alone
				} else {
					p.Free(h.b)
				}
			default:
				// Freed twice. (A Free after the buffer was handed out
				// again cannot be told from its new holder's, here as in
				// the C allocator; poison builds catch that in arrow-go.)
				i := rng.IntN(len(live))
				h := live[i]
				live = append(live[:i], live[i+1:]...)
				dirty(h.b)
				p.Free(h.b)
				p.Free(h.b)
			}
			// The caller writes somewhere in each buffer it holds.
			for _, h := range live {
				if len(h.b) > 0 {
					i := rng.IntN(len(h.b))
					v := byte(rng.IntN(255) + 1)
					h.b[i], h.want[i] = v, v
				}
			}
			for i, h := range live {
				if string(h.b) != string(h.want) {
					t.Fatalf("seed %d step %d: a %d-byte buffer holds bytes the caller did not write", seed, step, len(h.b))
				}
				for _, o := range live[i+1:] {
					if overlap(h.b, o.b) {
						t.Fatalf("seed %d step %d: two buffers the caller holds share memory", seed, step)
					}
				}
			}
			if p.held > maxHeld {
				t.Fatalf("seed %d step %d: pool holds %d bytes, bound %d", seed, step, p.held, maxHeld)
			}
		}
		if err := p.check(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// dirty fills b as a caller that used every byte would leave it, so a
// reused buffer that is not cleared where it must be shows non-zero bytes
// in plain builds too (poison builds overwrite freed buffers anyway).
func dirty(b []byte) {
	for i := range b {
		b[i] = 0xEE
	}
}

func overlap(a, b []byte) bool {
	if cap(a) == 0 || cap(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return a0 < b0+uintptr(cap(b)) && b0 < a0+uintptr(cap(a))
}

// TestBufferPoolReuses checks that the pool does what it is for: a freed
// buffer serves the next request of its class, and growth within a class
// keeps the buffer in place.
func TestBufferPoolReuses(t *testing.T) {
	p := newBufferPool(poolHeldBytes)
	b := p.Allocate(minPooled + 1)
	first := unsafe.SliceData(b)
	if g := p.Reallocate(2*minPooled, b); unsafe.SliceData(g) != first {
		t.Fatal("growing within the class moved the buffer")
	} else {
		b = g
	}
	b[0] = 1
	p.Free(b)
	c := p.Allocate(2*minPooled - 5)
	if unsafe.SliceData(c) != first {
		t.Fatal("a freed buffer was not reused for a request of its class")
	}
	if c[0] != 0 {
		t.Fatal("a reused buffer was not zeroed")
	}
	if d := p.Allocate(2*minPooled - 5); unsafe.SliceData(d) == first {
		t.Fatal("a buffer in use was handed out again")
	}
}
