package delta

import (
	"testing"

	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/sinktest"
)

var _ sinktest.RowReader = (*Table)(nil)

// TestConformance runs the sink conformance suite on a local table and on
// a mem:// one, reading the rows back through ReadSnapshotRows.
func TestConformance(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		sinktest.Run(t, func(t *testing.T) sink.Sink { return openLocal(t, t.TempDir(), Options{CheckpointInterval: 3}) })
	})
	t.Run("mem", func(t *testing.T) {
		sinktest.Run(t, func(t *testing.T) sink.Sink { return openLocal(t, "mem://", Options{CheckpointInterval: 3}) })
	})
}
