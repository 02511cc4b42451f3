package decnum

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestCompareMatchesBigRat: random decimals (signs, leading and trailing
// zeros, empty sides of the point) order as big.Rat orders them, and equal
// numbers print alike.
func TestCompareMatchesBigRat(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	digits := func() string {
		b := make([]byte, rng.IntN(4))
		for i := range b {
			b[i] = byte('0' + rng.IntN(3))
		}
		return string(b)
	}
	gen := func() string {
		s := []string{"", "-", "+"}[rng.IntN(3)]
		ip, fp := digits(), digits()
		if ip == "" && fp == "" {
			ip = "0"
		}
		if fp != "" || rng.IntN(2) == 0 {
			return s + ip + "." + fp
		}
		return s + ip
	}
	rat := func(s string) *big.Rat {
		if s[len(s)-1] == '.' {
			s += "0"
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("big.Rat cannot read %q", s)
		}
		return r
	}
	for range 5000 {
		a, b := gen(), gen()
		x, okx := Parse(a)
		y, oky := Parse(b)
		if !okx || !oky {
			t.Fatalf("Parse(%q) %v, Parse(%q) %v", a, okx, b, oky)
		}
		want := rat(a).Cmp(rat(b))
		if got := x.Compare(y); got != want {
			t.Fatalf("Compare(%q, %q) = %d, big.Rat says %d", a, b, got, want)
		}
		if (x.String() == y.String()) != (want == 0) {
			t.Fatalf("String: %q -> %s, %q -> %s, equal numbers %v", a, x, b, y, want == 0)
		}
	}
	for _, bad := range []string{"", "-", ".", "+.", "1e5", "1.2.3", "0x10", " 1", "١"} {
		if _, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// TestFormatScaledMatchesBigRat: FormatScaled agrees with big.Rat's exact
// rendering for random values and scales, including zero and values
// shorter than their scale.
func TestFormatScaledMatchesBigRat(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 20000 {
		n := new(big.Int).SetUint64(r.Uint64() >> r.IntN(64))
		if r.IntN(2) == 0 { // up to 128 bits, as decimal(38, s)
			n.Lsh(n, 64).Or(n, new(big.Int).SetUint64(r.Uint64()))
		}
		if r.IntN(2) == 0 {
			n.Neg(n)
		}
		scale := r.IntN(39)
		want := new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)).FloatString(scale)
		if got := FormatScaled(n, scale); got != want {
			t.Fatalf("FormatScaled(%s, %d) = %q, want %q", n, scale, got, want)
		}
	}
}
