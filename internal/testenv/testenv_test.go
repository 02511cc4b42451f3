package testenv

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseSkipReadsSkipMessage(t *testing.T) {
	for _, tc := range []struct{ suite, why, enable string }{
		{"delta-rs and DuckDB readers", "CDCSNAP_PYTHON is not set", "go run ./internal/testrun"},
		{`odd "name"; enable: x`, "a; b", "A=1 go test ./..."},
	} {
		line := "    interop_test.go:36: " + SkipMessage(tc.suite, tc.why, tc.enable)
		suite, why, enable, ok := ParseSkip(line)
		if !ok || suite != tc.suite || why != tc.why {
			t.Errorf("ParseSkip(%q) = %q, %q, %q, %v", line, suite, why, enable, ok)
		}
		if enable != tc.enable {
			t.Errorf("ParseSkip(%q): enable %q, want %q", line, enable, tc.enable)
		}
	}
	if _, _, _, ok := ParseSkip("--- SKIP: TestX (0.00s)"); ok {
		t.Error("ParseSkip took a line without the form")
	}
}

// FuzzParseSkip: ParseSkip never panics, and reads back any message
// SkipMessage writes whose parts hold no line break and whose reason and
// enable line do not themselves contain "; enable: ".
func FuzzParseSkip(f *testing.F) {
	f.Add("delta-rs", "CDCSNAP_PYTHON is not set", "go run ./internal/testrun", "    x_test.go:1: ")
	f.Add(`a "b"`, "c; d", "E=1 f", "")
	f.Fuzz(func(t *testing.T, suite, why, enable, prefix string) {
		_, _, _, _ = ParseSkip(prefix + suite + why + enable)
		for _, s := range []string{suite, why, enable, prefix} {
			if strings.ContainsAny(s, "\n\r") {
				return
			}
		}
		if strings.Contains(why+enable, "; enable: ") || strings.Contains(enable, "; enable:") || !utf8.ValidString(suite) {
			return
		}
		gs, gw, ge, ok := ParseSkip(prefix + SkipMessage(suite, why, enable))
		if !ok || gs != suite || ge != enable || gw != why {
			if strings.Contains(prefix, `suite "`) {
				return // the prefix holds a message of its own
			}
			t.Fatalf("ParseSkip(SkipMessage(%q, %q, %q)) = %q, %q, %q, %v", suite, why, enable, gs, gw, ge, ok)
		}
	})
}
