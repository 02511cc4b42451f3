// Package collate holds SQL Server's string comparison rules that keyrange
// and the fake share: case folding for case-insensitive collations and the
// padding of the shorter string with spaces (source/sqlserver/FACTS.md,
// F22 and F23).
package collate

import (
	"strings"
	"unicode"
)

// Fold folds case the way cdcsnap models a case-insensitive collation:
// Unicode simple case mappings. Under Turkish and Azeri collations use
// FoldTurkic instead.
func Fold(s string) string {
	return strings.Map(func(r rune) rune { return unicode.ToLower(unicode.ToUpper(r)) }, s)
}

// FoldTurkic folds case as Turkish and Azeri do: dotted and dotless I are
// two letters, I pairs with ı and İ with i, so 'I' and 'i' differ.
func FoldTurkic(s string) string {
	return strings.Map(func(r rune) rune { return unicode.TurkishCase.ToLower(unicode.TurkishCase.ToUpper(r)) }, s)
}

// EqualASCIIFold reports whether x and y are equal when ASCII letters are
// folded to one case and trailing spaces are ignored: the equality every
// case-insensitive collation certainly has. Under Turkish and Azeri ones
// (turkic) 'I' and 'i' are two letters, so they must match as they are.
// Any other character must match byte for byte.
func EqualASCIIFold(x, y string, turkic bool) bool {
	x, y = strings.TrimRight(x, " "), strings.TrimRight(y, " ")
	if len(x) != len(y) {
		return false
	}
	for i := 0; i < len(x); i++ {
		a, b := x[i], y[i]
		if a == b {
			continue
		}
		if turkic && (a == 'I' || a == 'i' || b == 'I' || b == 'i') {
			return false
		}
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// ComparePadded compares as SQL Server does (FACTS.md F22): the shorter string padded with
// spaces to the length of the longer. Trailing spaces so never matter
// ('a' = 'a  '), and a character below the space sorts a longer string
// first ('a' + CHAR(9) < 'a'), where plain trimming would put it after.
func ComparePadded(x, y string) int {
	n := min(len(x), len(y))
	if r := strings.Compare(x[:n], y[:n]); r != 0 {
		return r
	}
	// One of the rests is empty: compare the other with spaces.
	return padSign(x[n:]) - padSign(y[n:])
}

// padSign compares s with as many spaces: -1, 0 or +1.
func padSign(s string) int {
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == ' ':
		case s[i] < ' ':
			return -1
		default:
			return 1
		}
	}
	return 0
}
