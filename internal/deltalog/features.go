package deltalog

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Table features, as an appending writer meets them (PROTOCOL.md, "Table
// Features" and each feature's writer requirements). A table at writer
// version 7 lists its features; an older one implies them by version
// (PROTOCOL.md, "Writer Version Requirements"): 2 appendOnly and
// invariants, 3 checkConstraints, 4 changeDataFeed and generatedColumns,
// 5 columnMapping, 6 identityColumns.
//
// sink/delta only appends (snapshot parts, change batches, chunk waves),
// so most features ask nothing of it, or something it does:
//
//   - appendOnly: it never removes or rewrites a file;
//   - changeDataFeed: a commit that only adds files needs no cdc files
//     ("Change Data Files": readers take inserts from the add actions);
//   - deletionVectors, domainMetadata, vacuumProtocolCheck: nothing to
//     do when appending (it writes no vector or domain of its own, and
//     reads vectors wherever it reads rows);
//   - typeWidening: a widened column takes the bronze records cast to its
//     wider type (schema.go, widens), and older files read cast to it;
//   - v2Checkpoint: it writes no checkpoint into a table with features;
//   - timestampNtz: its columns take the records' naive timestamps;
//   - inCommitTimestamp: each commit's commitInfo, first in the commit,
//     carries inCommitTimestamp (sink/delta, commit.go);
//   - rowTracking: fresh baseRowId and defaultRowCommitVersion on every
//     add, and the delta.rowTracking high water mark (sink/delta, commit.go).
//
// Features that constrain rows are honoured when they constrain nothing
// here, and refused naming what they would need otherwise: a column with
// a delta.invariants expression, a delta.constraints.<name> CHECK
// constraint, a generated column, an identity column. columnMapping
// gets physical names and field ids (colmap.go). Any other writer feature
// is refused, named.

// legacyWriterFeatures are the features each writer version before 7
// implies.
var legacyWriterFeatures = [][]string{
	2: {"appendOnly", "invariants"},
	3: {"checkConstraints"},
	4: {"changeDataFeed", "generatedColumns"},
	5: {"columnMapping"},
	6: {"identityColumns"},
}

// appendableFeatures need nothing of an appending writer, or only what
// sink/delta does.
var appendableFeatures = map[string]bool{
	"appendOnly": true, "changeDataFeed": true, "deletionVectors": true, "domainMetadata": true,
	"typeWidening": true, "typeWidening-preview": true, "vacuumProtocolCheck": true, "v2Checkpoint": true,
	"timestampNtz": true, "inCommitTimestamp": true, "rowTracking": true,
	// Checked against the table's schema and properties below.
	"invariants": true, "checkConstraints": true, "generatedColumns": true, "identityColumns": true, "columnMapping": true,
}

// writerFeatures returns the writer features of p, listed or implied.
func writerFeatures(p *Protocol) []string {
	if p.MinWriterVersion >= 7 {
		return p.WriterFeatures
	}
	var out []string
	for v := 2; v <= min(p.MinWriterVersion, 6); v++ {
		out = append(out, legacyWriterFeatures[v]...)
	}
	return out
}

// HasWriterFeature reports whether p lists or implies feature f.
func HasWriterFeature(p *Protocol, f string) bool {
	return p != nil && slices.Contains(writerFeatures(p), f)
}

// FeatureProblems returns why an appending writer cannot append to the
// table of s: each unsupported feature, and each constraint it would have
// to enforce, named.
func FeatureProblems(s *State) []string {
	var out []string
	for _, f := range writerFeatures(s.Protocol) {
		if !appendableFeatures[f] {
			out = append(out, f)
		}
	}
	fs := writerFeatures(s.Protocol)
	has := func(f string) bool { return slices.Contains(fs, f) }
	var invariants, generated, identity []string
	for _, c := range s.Schema.Fields {
		if _, ok := c.Metadata["delta.invariants"]; ok && has("invariants") {
			invariants = append(invariants, fmt.Sprintf("%s: %v", c.Name, c.Metadata["delta.invariants"]))
		}
		if e, ok := c.Metadata["delta.generationExpression"]; ok && has("generatedColumns") {
			generated = append(generated, fmt.Sprintf("%s AS (%v)", c.Name, e))
		}
		for k := range c.Metadata {
			if strings.HasPrefix(k, "delta.identity.") && has("identityColumns") {
				identity = append(identity, c.Name)
				break
			}
		}
	}
	var checks []string
	if has("checkConstraints") {
		for k, v := range s.Meta.Configuration {
			if name, ok := strings.CutPrefix(k, "delta.constraints."); ok {
				checks = append(checks, fmt.Sprintf("%s: %s", name, v))
			}
		}
		sort.Strings(checks)
	}
	if len(invariants) > 0 {
		out = append(out, "invariants ("+strings.Join(invariants, "; ")+")")
	}
	if len(checks) > 0 {
		out = append(out, "checkConstraints ("+strings.Join(checks, "; ")+")")
	}
	if len(generated) > 0 {
		out = append(out, "generatedColumns ("+strings.Join(generated, "; ")+")")
	}
	if len(identity) > 0 {
		out = append(out, "identityColumns ("+strings.Join(identity, ", ")+")")
	}
	return out
}

// InCommitTimestamps reports whether commits must carry inCommitTimestamp.
func InCommitTimestamps(s *State) bool {
	return HasWriterFeature(s.Protocol, "inCommitTimestamp") && s.Meta != nil &&
		strings.EqualFold(s.Meta.Configuration["delta.enableInCommitTimestamps"], "true")
}

// RowTracking reports whether adds must carry fresh row ids.
func RowTracking(s *State) bool {
	return HasWriterFeature(s.Protocol, "rowTracking") && s.Meta != nil &&
		!strings.EqualFold(s.Meta.Configuration["delta.rowTrackingSuspended"], "true")
}
