package testenv

import "testing"

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
