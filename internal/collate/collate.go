// Package collate holds SQL Server's string comparison rules that keyrange
// and the fake share: case folding for case-insensitive collations and the
// padding of the shorter string with spaces.
package collate

import (
	"strings"
	"unicode"
)

// Fold folds case the way a case-insensitive collation treats letters.
func Fold(s string) string {
	return strings.Map(func(r rune) rune { return unicode.ToLower(unicode.ToUpper(r)) }, s)
}

// ComparePadded compares as SQL Server does: the shorter string padded with
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
