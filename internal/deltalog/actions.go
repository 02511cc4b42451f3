package deltalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
)

// StringMap is a Delta map<string,string> (partitionValues, tags). It
// decodes both from a JSON object (the JSON log) and from a list of
// {"key","value"} pairs (an Arrow map read from a Parquet checkpoint).
type StringMap map[string]string

// UnmarshalJSON decodes an object or a list of key/value pairs; a JSON
// null value becomes "".
func (m *StringMap) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		*m = nil
		return nil
	}
	if b[0] == '{' {
		var mm map[string]*string
		if err := json.Unmarshal(b, &mm); err != nil {
			return err
		}
		out := make(StringMap, len(mm))
		for k, v := range mm {
			if v != nil {
				out[k] = *v
			} else {
				out[k] = ""
			}
		}
		*m = out
		return nil
	}
	var kvs []struct {
		Key   string  `json:"key"`
		Value *string `json:"value"`
	}
	if err := json.Unmarshal(b, &kvs); err != nil {
		return fmt.Errorf("map: %w", err)
	}
	out := make(StringMap, len(kvs))
	for _, kv := range kvs {
		if kv.Value != nil {
			out[kv.Key] = *kv.Value
		} else {
			out[kv.Key] = ""
		}
	}
	*m = out
	return nil
}

// AddFile is a Delta add action: a data file of the table.
type AddFile struct {
	// Path is relative to the table root (or absolute URI), URL-encoded as
	// the protocol says.
	Path string `json:"path"`
	// PartitionValues maps partition columns to their serialized value.
	PartitionValues StringMap `json:"partitionValues"`
	// Size is the file's size in bytes.
	Size int64 `json:"size"`
	// ModificationTime is milliseconds since the epoch.
	ModificationTime int64 `json:"modificationTime"`
	// DataChange is false for files that only rearrange data.
	DataChange bool `json:"dataChange"`
	// Stats is the JSON statistics string (numRecords, minValues,
	// maxValues, nullCount), empty when the writer wrote none.
	Stats string `json:"stats,omitempty"`
	// Tags are the writer's tags.
	Tags StringMap `json:"tags,omitempty"`
	// DeletionVector, when set, names the rows of the file that are
	// deleted (tables with the deletionVectors feature); readers skip them.
	// This package never writes one.
	DeletionVector *DeletionVector `json:"deletionVector,omitempty"`
	// BaseRowID is the row id of the file's first row (row tracking).
	BaseRowID *int64 `json:"baseRowId,omitempty"`
	// DefaultRowCommitVersion is the version that added the file (row
	// tracking).
	DefaultRowCommitVersion *int64 `json:"defaultRowCommitVersion,omitempty"`
}

// DomainMetadata is a Delta DomainMetadata action.
type DomainMetadata struct {
	Domain        string `json:"domain"`        // the domain's name
	Configuration string `json:"configuration"` // its configuration, a JSON string
	Removed       bool   `json:"removed"`       // a tombstone for the domain
}

// RowTrackingDomain holds the row id high water mark.
const RowTrackingDomain = "delta.rowTracking"

// FileStats is the decoded form of AddFile.Stats.
type FileStats struct {
	// NumRecords is the file's row count.
	NumRecords int64 `json:"numRecords"`
	// MinValues holds each column's smallest value (strings truncated to
	// a prefix; none for binary and boolean columns).
	MinValues map[string]any `json:"minValues,omitempty"`
	// MaxValues holds each column's largest value (a truncated string
	// gets U+10FFFF appended, so it stays an upper bound).
	MaxValues map[string]any `json:"maxValues,omitempty"`
	// NullCount holds each column's NULL count.
	NullCount map[string]int64 `json:"nullCount,omitempty"`
}

// Key is the file's object Key below the table root: Path is a URI
// path (escaped as the protocol says); one that does not unescape is
// taken as it is.
func (a AddFile) Key() string {
	if k, err := url.PathUnescape(a.Path); err == nil {
		return k
	}
	return a.Path
}

// ParseStats decodes Stats (numbers keep their text as json.Number).
func (a AddFile) ParseStats() (FileStats, error) {
	var s FileStats
	if a.Stats == "" {
		return s, fmt.Errorf("delta: file %s has no stats", a.Path)
	}
	d := json.NewDecoder(bytes.NewReader([]byte(a.Stats)))
	d.UseNumber()
	if err := d.Decode(&s); err != nil {
		return s, fmt.Errorf("delta: stats of %s: %w", a.Path, err)
	}
	return s, nil
}

// RemoveFile is a Delta remove action: a tombstone of a logical file (a
// path and its deletion vector). Its fields mean what AddFile's do.
type RemoveFile struct {
	Path                 string          `json:"path"`
	DeletionTimestamp    int64           `json:"deletionTimestamp,omitempty"` // milliseconds since the epoch
	DataChange           bool            `json:"dataChange"`
	ExtendedFileMetadata bool            `json:"extendedFileMetadata,omitempty"` // the fields below are present
	PartitionValues      StringMap       `json:"partitionValues,omitempty"`
	Size                 int64           `json:"size,omitempty"`
	DeletionVector       *DeletionVector `json:"deletionVector,omitempty"`
}

// Txn is a Delta txn (SetTransaction) action: an application's last
// committed version, kept by checkpoints.
type Txn struct {
	// AppID names the application (cdcsnap's records: see the package doc).
	AppID string `json:"appId"`
	// Version is the application's last committed version.
	Version int64 `json:"version"`
	// LastUpdated is the wall-clock time of the commit, in milliseconds.
	LastUpdated int64 `json:"lastUpdated,omitempty"`
}

// Protocol is the table's protocol action.
type Protocol struct {
	// MinReaderVersion is the reader protocol version a reader needs.
	MinReaderVersion int `json:"minReaderVersion"`
	// MinWriterVersion is the writer protocol version a writer needs.
	MinWriterVersion int `json:"minWriterVersion"`
	// ReaderFeatures lists the table features readers must support
	// (reader version 3).
	ReaderFeatures []string `json:"readerFeatures,omitempty"`
	// WriterFeatures lists the table features writers must support
	// (writer version 7).
	WriterFeatures []string `json:"writerFeatures,omitempty"`
}

// Format is the data files' format in MetaData: provider "parquet".
type Format struct {
	Provider string    `json:"provider"` // "parquet"
	Options  StringMap `json:"options"`  // the format's options (none)
}

// MetaData is a Delta metaData action: the table's id, schema, partition
// columns and properties.
type MetaData struct {
	ID               string    `json:"id"`                    // a UUID
	Name             *string   `json:"name,omitempty"`        // the table's name, if any
	Description      *string   `json:"description,omitempty"` // its description, if any
	Format           Format    `json:"format"`                // the data files' format
	SchemaString     string    `json:"schemaString"`          // the schema as JSON (ParseSchema)
	PartitionColumns []string  `json:"partitionColumns"`      // by display name
	Configuration    StringMap `json:"configuration"`         // the table's properties
	CreatedTime      *int64    `json:"createdTime,omitempty"` // milliseconds since the epoch
}

// Action is one line of a commit file (or one row of a checkpoint).
// One field is set: the action's kind.
type Action struct {
	Add        *AddFile        `json:"add,omitempty"`        // a data file
	Remove     *RemoveFile     `json:"remove,omitempty"`     // a tombstone
	MetaData   *MetaData       `json:"metaData,omitempty"`   // the table's metadata
	Protocol   *Protocol       `json:"protocol,omitempty"`   // the table's protocol
	Txn        *Txn            `json:"txn,omitempty"`        // an application's version
	CommitInfo json.RawMessage `json:"commitInfo,omitempty"` // the commit's provenance, kept raw
	// other actions (cdc, domainMetadata, checkpointMetadata, sidecar)
	// are ignored by this reader; the protocol check refuses tables
	// whose features make them matter.
	CDC            json.RawMessage `json:"cdc,omitempty"`
	DomainMetadata json.RawMessage `json:"domainMetadata,omitempty"`
	CheckpointMeta json.RawMessage `json:"checkpointMetadata,omitempty"`
	Sidecar        json.RawMessage `json:"sidecar,omitempty"`
}
