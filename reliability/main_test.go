package reliability_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the SIGKILL test's child when the test binary was
// re-executed as one, and otherwise the tests, failing if any goroutine
// outlives them.
func TestMain(m *testing.M) {
	if killChild() {
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
