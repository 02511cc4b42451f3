package fake_test

import (
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/sinktest"
)

// TestMemSinkConformance runs the sink conformance suite on MemSink.
func TestMemSinkConformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink {
		s := fake.NewMemSink()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
