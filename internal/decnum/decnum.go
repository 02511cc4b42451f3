// Package decnum parses, compares and formats exact decimal numbers in
// text form ("-12.3400"), as SQL Server returns decimal and money values:
// one rule for keyrange's comparisons, the fake database's key order, and
// every place that renders an unscaled integer at a scale.
package decnum

import (
	"cmp"
	"math/big"
	"strings"
)

// Num is a parsed decimal: sign, integer digits without leading zeros and
// fraction digits without trailing zeros. Zero is never negative.
type Num struct {
	neg        bool
	intPart    string
	fracDigits string
}

// Parse reads [+-]digits[.digits] (either side of the point may be
// empty, not both); ok is false for anything else. It never allocates
// more than the input's size, unlike big.Rat, which would expand
// "1e999999999".
func Parse(s string) (d Num, ok bool) {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		d.neg = s[0] == '-'
		s = s[1:]
	}
	ip, fp, _ := strings.Cut(s, ".")
	if ip == "" && fp == "" {
		return d, false
	}
	for _, part := range []string{ip, fp} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return d, false
			}
		}
	}
	d.intPart = strings.TrimLeft(ip, "0")
	d.fracDigits = strings.TrimRight(fp, "0")
	if d.intPart == "" && d.fracDigits == "" {
		d.neg = false
	}
	return d, true
}

// Compare returns -1, 0 or +1 as d is less than, equal to or greater
// than e, numerically.
func (d Num) Compare(e Num) int {
	if d.neg != e.neg {
		if d.neg {
			return -1
		}
		return 1
	}
	r := cmp.Compare(len(d.intPart), len(e.intPart))
	if r == 0 {
		r = strings.Compare(d.intPart, e.intPart)
	}
	if r == 0 {
		r = strings.Compare(d.fracDigits, e.fracDigits)
	}
	if d.neg {
		r = -r
	}
	return r
}

// String returns the canonical form: equal numbers, equal strings.
func (d Num) String() string {
	s := d.intPart
	if s == "" {
		s = "0"
	}
	if d.fracDigits != "" {
		s += "." + d.fracDigits
	}
	if d.neg {
		s = "-" + s
	}
	return s
}

// FormatScaled renders n / 10^scale with exactly scale fraction digits
// ("-0.0050" for -50 at scale 4, "12" at scale 0).
func FormatScaled(n *big.Int, scale int) string {
	digits := new(big.Int).Abs(n).String()
	if scale > 0 {
		if len(digits) <= scale {
			digits = strings.Repeat("0", scale-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	}
	if n.Sign() < 0 {
		digits = "-" + digits
	}
	return digits
}
