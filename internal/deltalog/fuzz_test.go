package deltalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// fuzzCommit is a table's first commit, as cdcsnap writes it.
const fuzzCommit = `{"commitInfo":{"timestamp":1,"operation":"WRITE","userMetadata":"{\"snapshot\":\"dbo_t\",\"lsn\":\"0x0000002A00000F380003\"}"}}
{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}
{"metaData":{"id":"a","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[{\"name\":\"id\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}}]}","partitionColumns":[],"configuration":{},"createdTime":1}}
{"txn":{"appId":"cdcsnap/snapshot/dbo_t/0x0000002A00000F380003/1767225600000000/2","version":0,"lastUpdated":1}}
{"add":{"path":"part-00000-x-c000.snappy.parquet","partitionValues":{},"size":10,"modificationTime":1,"dataChange":true,"stats":"{\"numRecords\":2}"}}
`

// FuzzParseCommit: any bytes as a commit file parse into actions or fail
// with a *CorruptLogError, never panic; parsed actions re-encode to
// lines that parse to the same encoding (nothing is lost or invented
// between reading and rewriting an action), and replaying them into a
// state fails cleanly or not at all.
func FuzzParseCommit(f *testing.F) {
	f.Add([]byte(fuzzCommit))
	f.Add([]byte(`{"remove":{"path":"a","deletionTimestamp":1,"dataChange":true}}` + "\n" + `{"txn":{"appId":"x","version":-1}}`))
	f.Add([]byte(`{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors"],"writerFeatures":["deletionVectors"]}}`))
	f.Add([]byte(`{"add":{"path":"p","partitionValues":{"k":null},"stats":"{\"numRecords\":-1}"}}`))
	f.Add([]byte("{\"add\": {\"path\": \n"))
	f.Add([]byte(`{"metaData":{"configuration":{"delta.columnMapping.mode":"name"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		acts, err := ParseCommit("_delta_log/00000000000000000000.json", b)
		if err != nil {
			var c *CorruptLogError
			if !errors.As(err, &c) {
				t.Fatalf("parse error is %T, not *CorruptLogError: %v", err, err)
			}
			return
		}
		var enc bytes.Buffer
		for i := range acts {
			line, err := json.Marshal(&acts[i])
			if err != nil {
				return // e.g. a stats string that is not valid JSON kept raw
			}
			enc.Write(line)
			enc.WriteByte('\n')
		}
		again, err := ParseCommit("re-encoded", enc.Bytes())
		if err != nil {
			t.Fatalf("re-encoded actions do not parse: %v\n%s", err, enc.Bytes())
		}
		if len(again) != len(acts) {
			t.Fatalf("%d actions re-encoded into %d", len(acts), len(again))
		}
		var enc2 bytes.Buffer
		for i := range again {
			line, err := json.Marshal(&again[i])
			if err != nil {
				t.Fatal(err)
			}
			enc2.Write(line)
			enc2.WriteByte('\n')
		}
		if !bytes.Equal(enc.Bytes(), enc2.Bytes()) {
			t.Fatalf("encoding is not stable:\n%s\n%s", enc.Bytes(), enc2.Bytes())
		}
		s := EmptyState()
		for i := range acts {
			if err := s.Apply(&acts[i]); err != nil {
				return
			}
		}
		_ = s.SortedFiles()
	})
}
