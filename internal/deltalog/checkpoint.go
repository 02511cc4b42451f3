package deltalog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/cdcsnap/cdcsnap/internal/pqfile"
)

// checkpointSchema is the classic checkpoint's schema (Delta PROTOCOL,
// "Checkpoint Schema"), for tables without partition columns or features.
func checkpointSchema() *arrow.Schema {
	str := arrow.BinaryTypes.String
	i64 := arrow.PrimitiveTypes.Int64
	i32 := arrow.PrimitiveTypes.Int32
	boolean := arrow.FixedWidthTypes.Boolean
	smap := arrow.MapOf(str, str)
	f := func(name string, t arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: t, Nullable: true}
	}
	return arrow.NewSchema([]arrow.Field{
		f("txn", arrow.StructOf(f("appId", str), f("version", i64), f("lastUpdated", i64))),
		f("add", arrow.StructOf(f("path", str), f("partitionValues", smap), f("size", i64), f("modificationTime", i64), f("dataChange", boolean), f("stats", str), f("tags", smap))),
		f("remove", arrow.StructOf(f("path", str), f("deletionTimestamp", i64), f("dataChange", boolean), f("extendedFileMetadata", boolean), f("partitionValues", smap), f("size", i64))),
		f("metaData", arrow.StructOf(f("id", str), f("name", str), f("description", str),
			f("format", arrow.StructOf(f("provider", str), f("options", smap))),
			f("schemaString", str), f("partitionColumns", arrow.ListOf(str)), f("configuration", smap), f("createdTime", i64))),
		f("protocol", arrow.StructOf(f("minReaderVersion", i32), f("minWriterVersion", i32), f("readerFeatures", arrow.ListOf(str)), f("writerFeatures", arrow.ListOf(str)))),
	}, nil)
}

// kv turns a map into the [{"key","value"}] form Arrow's JSON reader
// takes for a map column.
func kv(m StringMap) []map[string]string {
	out := make([]map[string]string, 0, len(m))
	for k, v := range m {
		out = append(out, map[string]string{"key": k, "value": v})
	}
	return out
}

// checkpointRows returns the checkpoint's rows as JSON objects: protocol,
// metaData, the live txns, the live files and the tombstones.
func checkpointRows(s *State) []map[string]any {
	rows := []map[string]any{}
	p := map[string]any{"minReaderVersion": s.Protocol.MinReaderVersion, "minWriterVersion": s.Protocol.MinWriterVersion}
	if s.Protocol.ReaderFeatures != nil {
		p["readerFeatures"] = s.Protocol.ReaderFeatures
	}
	if s.Protocol.WriterFeatures != nil {
		p["writerFeatures"] = s.Protocol.WriterFeatures
	}
	rows = append(rows, map[string]any{"protocol": p})
	m := s.Meta
	md := map[string]any{
		"id": m.ID, "name": m.Name, "description": m.Description,
		"format":           map[string]any{"provider": m.Format.Provider, "options": kv(m.Format.Options)},
		"schemaString":     m.SchemaString,
		"partitionColumns": append([]string{}, m.PartitionColumns...),
		"configuration":    kv(m.Configuration),
		"createdTime":      m.CreatedTime,
	}
	rows = append(rows, map[string]any{"metaData": md})
	for _, tx := range s.Txns {
		rows = append(rows, map[string]any{"txn": map[string]any{"appId": tx.AppID, "version": tx.Version, "lastUpdated": tx.LastUpdated}})
	}
	for _, a := range s.SortedFiles() {
		add := map[string]any{"path": a.Path, "partitionValues": kv(a.PartitionValues), "size": a.Size,
			"modificationTime": a.ModificationTime, "dataChange": a.DataChange}
		if a.Stats != "" {
			add["stats"] = a.Stats
		}
		if a.Tags != nil {
			add["tags"] = kv(a.Tags)
		}
		rows = append(rows, map[string]any{"add": add})
	}
	for _, r := range s.Removes {
		rows = append(rows, map[string]any{"remove": map[string]any{"path": r.Path, "deletionTimestamp": r.DeletionTimestamp,
			"dataChange": false, "extendedFileMetadata": r.ExtendedFileMetadata, "partitionValues": kv(r.PartitionValues), "size": r.Size}})
	}
	return rows
}

// WriteCheckpoint writes a classic V1 checkpoint of s. Its schema has no
// place for deletion vectors, row ids or domains, so callers keep it to
// tables without features.
func (l *Log) WriteCheckpoint(ctx context.Context, s *State, parts int) error {
	rows := checkpointRows(s)
	parts = min(parts, len(rows))
	schema := checkpointSchema()
	var total int64
	per := (len(rows) + parts - 1) / parts
	for p := 0; p < parts; p++ {
		chunk := rows[p*per : min(len(rows), (p+1)*per)]
		js, err := json.Marshal(chunk)
		if err != nil {
			return err
		}
		rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, schema, bytes.NewReader(js))
		if err != nil {
			return fmt.Errorf("delta: building checkpoint: %w", err)
		}
		buf, err := writeCheckpointPart(schema, rec)
		rec.Release()
		if err != nil {
			return fmt.Errorf("delta: writing checkpoint: %w", err)
		}
		key := fmt.Sprintf("%s%020d.checkpoint.parquet", LogDir, s.Version)
		if parts > 1 {
			key = fmt.Sprintf("%s%020d.checkpoint.%010d.%010d.parquet", LogDir, s.Version, p+1, parts)
		}
		if err := l.writeLogFile(ctx, key, buf.Bytes()); err != nil {
			return fmt.Errorf("delta: writing %s: %w", key, err)
		}
		total += int64(buf.Len())
	}
	lc := map[string]any{"version": s.Version, "size": len(rows), "sizeInBytes": total, "numOfAddFiles": len(s.Files)}
	if parts > 1 {
		lc["parts"] = parts
	}
	b, _ := json.Marshal(lc)
	if err := l.writeLogFile(ctx, LogDir+"_last_checkpoint", b); err != nil {
		return fmt.Errorf("delta: writing _last_checkpoint: %w", err)
	}
	l.logger().Debug("checkpoint written", "version", s.Version, "parts", parts, "actions", len(rows))
	return nil
}

// writeCheckpointPart writes rec as one Parquet file of one row group,
// Snappy-compressed with arrow-go's codec: the bytes pqarrow.WriteTable
// wrote for it (internal/pqfile's tests hold the writer to that).
func writeCheckpointPart(schema *arrow.Schema, rec arrow.RecordBatch) (*bytes.Buffer, error) {
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy), parquet.WithMaxRowGroupLength(max(rec.NumRows(), 1)))
	w, err := pqfile.NewWriterEncoder(schema, &buf, props, nil)
	if err != nil {
		return nil, err
	}
	if err := w.Write(rec); err != nil {
		_ = w.Close()
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return &buf, nil
}
