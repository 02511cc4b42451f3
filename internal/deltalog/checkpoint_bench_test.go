package deltalog

import (
	"context"
	"fmt"
	"testing"

	"github.com/cdcsnap/cdcsnap/internal/localstore"
)

// benchState is a table's state with n live files (each with statistics,
// a partition value and a tag) and n/10 tombstones.
func benchState(n int) *State {
	s := EmptyState()
	s.Version = 41
	s.Protocol = &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	s.Meta = &MetaData{ID: "6f1c2c39-5a3e-4c4c-9a6e-0d4a3f0c9b21", Format: Format{Provider: "parquet", Options: StringMap{}},
		SchemaString:     `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}`,
		PartitionColumns: []string{}, Configuration: StringMap{"delta.checkpointInterval": "10"}}
	for i := range n {
		p := fmt.Sprintf("part-%05d-8c1e2f04-0b4e-4bd8-a3f4-6b0f2f8d%04d-c000.snappy.parquet", i, i%10000)
		s.Files[p] = &AddFile{Path: p, PartitionValues: StringMap{"region": fmt.Sprint("r", i%7)}, Size: int64(1000 + i),
			ModificationTime: 1700000000000 + int64(i), DataChange: true, Tags: StringMap{"origin": "bench"},
			Stats: fmt.Sprintf(`{"numRecords":%d,"minValues":{"id":%d},"maxValues":{"id":%d},"nullCount":{"id":0}}`, 100+i, i*100, i*100+99)}
	}
	for i := range n / 10 {
		p := fmt.Sprintf("part-%05d-removed.snappy.parquet", i)
		s.Removes[p] = &RemoveFile{Path: p, DeletionTimestamp: 1700000000000, ExtendedFileMetadata: true, PartitionValues: StringMap{"region": "r1"}, Size: 10}
	}
	return s
}

// BenchmarkCheckpoint writes and reads back the checkpoint of a table
// with 20,000 live files; it reports actions/s.
func BenchmarkCheckpoint(b *testing.B) {
	const files = 20000
	s := benchState(files)
	ctx := context.Background()
	actions := float64(len(checkpointRows(s)))
	b.Run("write", func(b *testing.B) {
		for range b.N {
			l := &Log{URL: "mem://bench", Store: localstore.NewMem()}
			if err := l.WriteCheckpoint(ctx, s, 1); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(actions*float64(b.N)/b.Elapsed().Seconds(), "actions/s")
	})
	b.Run("read", func(b *testing.B) {
		l := &Log{URL: "mem://bench", Store: localstore.NewMem()}
		if err := l.WriteCheckpoint(ctx, s, 1); err != nil {
			b.Fatal(err)
		}
		data, err := l.Store.ReadAll(ctx, fmt.Sprintf("%s%020d.checkpoint.parquet", LogDir, s.Version))
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			acts, err := checkpointActions(data)
			if err != nil || len(acts) != int(actions) {
				b.Fatalf("%d actions (%v), want %v", len(acts), err, actions)
			}
		}
		b.ReportMetric(actions*float64(b.N)/b.Elapsed().Seconds(), "actions/s")
	})
}
