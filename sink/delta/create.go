package delta

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
)

// CreateOptions shape a table this package creates (its first write);
// they are ignored when the table exists. The zero value creates what
// earlier releases created: an unpartitioned table at protocol (1, 2).
type CreateOptions struct {
	// PartitionBy names captured columns to partition the table by
	// (string, integer, date, timestamp, boolean or decimal columns).
	PartitionBy []string
	// Properties are table properties (metaData.configuration), for
	// example delta.appendOnly, delta.logRetentionDuration or
	// delta.enableChangeDataFeed. The properties the features below set
	// are set by them.
	Properties map[string]string
	// Features turns on table features, giving the table protocol (3, 7):
	// "deletionVectors" (delta.enableDeletionVectors), "inCommitTimestamp"
	// (delta.enableInCommitTimestamps), "rowTracking" (with
	// domainMetadata; delta.enableRowTracking and its materialized column
	// names), "columnMapping" (name mode: every column gets a physical
	// name and an id), "changeDataFeed" (delta.enableChangeDataFeed),
	// "appendOnly" (delta.appendOnly), "v2Checkpoint"
	// (delta.checkpointPolicy=v2), "timestampNtz", "domainMetadata" and
	// "vacuumProtocolCheck", "typeWidening" (delta.enableTypeWidening: a
	// wider column from the source widens the table's, PROTOCOL.md "Type
	// Widening"). Databricks turns on deletionVectors,
	// inCommitTimestamp and rowTracking for new tables.
	Features []string
}

// featureKinds lists the features CreateOptions can turn on, true for
// reader-writer features (listed in readerFeatures too).
var featureKinds = map[string]bool{
	"deletionVectors": true, "columnMapping": true, "timestampNtz": true, "v2Checkpoint": true, "vacuumProtocolCheck": true, "typeWidening": true,
	"inCommitTimestamp": false, "rowTracking": false, "domainMetadata": false, "changeDataFeed": false, "appendOnly": false,
}

// featureProperties are the table properties that turn a feature on,
// which the protocol must then list (Spark refuses such a table).
var featureProperties = map[string]string{
	"delta.enableDeletionVectors": "deletionVectors", "delta.enableInCommitTimestamps": "inCommitTimestamp",
	"delta.enableRowTracking": "rowTracking", "delta.columnMapping.mode": "columnMapping",
	"delta.enableChangeDataFeed": "changeDataFeed", "delta.checkpointPolicy": "v2Checkpoint",
	"delta.enableTypeWidening": "typeWidening",
	// delta.appendOnly needs only writer version 2, which every table has.
}

// validate names what is wrong with o, before any I/O.
func (o CreateOptions) validate() error {
	var bad []string
	for _, f := range o.Features {
		if _, ok := featureKinds[f]; !ok {
			bad = append(bad, fmt.Sprintf("feature %q (want one of %s)", f, strings.Join(slices.Sorted(maps.Keys(featureKinds)), ", ")))
		}
	}
	for k, v := range o.Properties {
		if f, ok := featureProperties[k]; ok && v != "" && v != "none" && v != "false" && v != "classic" || strings.HasPrefix(k, "delta.feature.") {
			if !ok {
				f = strings.TrimPrefix(k, "delta.feature.")
			}
			bad = append(bad, fmt.Sprintf("property %s turns on a table feature: ask for it in Features (%q), which also sets the protocol", k, f))
		}
	}
	seen := map[string]bool{}
	for _, c := range o.PartitionBy {
		if c == "" || seen[strings.ToLower(c)] {
			bad = append(bad, fmt.Sprintf("partition column %q (empty or given twice)", c))
		}
		seen[strings.ToLower(c)] = true
	}
	if len(bad) > 0 {
		return fmt.Errorf("delta: CreateOptions: %s", strings.Join(bad, "; "))
	}
	return nil
}

// createActions are the protocol and metaData of a new table of schema
// ds, as o asks.
func (o CreateOptions) createActions(ds deltalog.Schema, id string, now int64) ([]deltalog.Action, error) {
	conf := deltalog.StringMap{}
	maps.Copy(conf, o.Properties)
	features := slices.Clone(o.Features)
	has := func(f string) bool { return slices.Contains(features, f) }
	if has("rowTracking") && !has("domainMetadata") {
		features = append(features, "domainMetadata") // the high water mark lives in a domain
	}
	for _, f := range ds.Fields {
		if f.TypeName() == "timestamp_ntz" && !has("timestampNtz") {
			features = append(features, "timestampNtz") // the protocol's condition for the type
		}
	}
	for _, f := range features {
		switch f {
		case "deletionVectors":
			conf["delta.enableDeletionVectors"] = "true"
		case "inCommitTimestamp":
			conf["delta.enableInCommitTimestamps"] = "true"
		case "rowTracking":
			conf["delta.enableRowTracking"] = "true"
			conf["delta.rowTracking.materializedRowIdColumnName"] = "_row-id-col-" + deltalog.NewUUID()
			conf["delta.rowTracking.materializedRowCommitVersionColumnName"] = "_row-commit-version-col-" + deltalog.NewUUID()
		case "changeDataFeed":
			conf["delta.enableChangeDataFeed"] = "true"
		case "typeWidening":
			conf["delta.enableTypeWidening"] = "true"
		case "appendOnly":
			conf["delta.appendOnly"] = "true"
		case "v2Checkpoint":
			conf["delta.checkpointPolicy"] = "v2"
		case "columnMapping":
			conf["delta.columnMapping.mode"] = "name"
			conf["delta.columnMapping.maxColumnId"] = strconv.Itoa(len(ds.Fields))
			// Physical names follow from the column's position and name, so
			// every process writing data files before the creating commit
			// (fan-out workers) names the columns alike.
			for i := range ds.Fields {
				f := &ds.Fields[i]
				sum := sha256.Sum256([]byte(f.Name))
				f.Metadata = map[string]any{"delta.columnMapping.id": i + 1, "delta.columnMapping.physicalName": fmt.Sprintf("col-%d-%x", i+1, sum[:8])}
			}
		}
	}
	for _, c := range o.PartitionBy {
		found := false
		for _, f := range ds.Fields {
			found = found || f.Name == c
		}
		if !found {
			return nil, &deltalog.SchemaError{Column: c, Reason: "CreateOptions.PartitionBy names a column the records do not have"}
		}
	}
	p := &deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	if len(features) > 0 {
		p = &deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{}, WriterFeatures: []string{"appendOnly", "invariants"}}
		for _, f := range features {
			if featureKinds[f] && !slices.Contains(p.ReaderFeatures, f) {
				p.ReaderFeatures = append(p.ReaderFeatures, f)
			}
			if !slices.Contains(p.WriterFeatures, f) {
				p.WriterFeatures = append(p.WriterFeatures, f)
			}
		}
		sort.Strings(p.ReaderFeatures)
		sort.Strings(p.WriterFeatures)
	}
	return []deltalog.Action{
		{Protocol: p},
		{MetaData: &deltalog.MetaData{ID: id, Format: deltalog.Format{Provider: "parquet", Options: deltalog.StringMap{}}, SchemaString: ds.String(),
			PartitionColumns: append([]string{}, o.PartitionBy...), Configuration: conf, CreatedTime: &now}},
	}, nil
}

// created is the state the table of schema will have once its first
// commit lands, for the data files written before that commit.
func (o CreateOptions) created(schema deltalog.Schema) (*deltalog.State, error) {
	acts, err := o.createActions(schema, "", 0)
	if err != nil {
		return nil, err
	}
	s := deltalog.EmptyState()
	for i := range acts {
		if err := s.Apply(&acts[i]); err != nil {
			return nil, err
		}
	}
	return s, nil
}
