package mssqlstmt

import (
	"strings"
	"testing"
)

func TestQuoteName(t *testing.T) {
	for in, want := range map[string]string{
		"orders":     "[orders]",
		"a]b":        "[a]]b]",
		"]]":         "[]]]]]",
		"a b 'c\" [": "[a b 'c\" []",
		"Ördersё":    "[Ördersё]",
	} {
		got, err := QuoteName(in)
		if err != nil || got != want {
			t.Errorf("QuoteName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", 129), "a\x00b", "\xff"} {
		if _, err := QuoteName(bad); err == nil {
			t.Errorf("QuoteName(%q) accepted", bad)
		}
	}
	if _, err := QuoteName(strings.Repeat("ё", 128)); err != nil {
		t.Errorf("128 characters refused: %v", err)
	}
}
