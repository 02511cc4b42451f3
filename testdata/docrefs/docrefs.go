// Package docrefs holds the doc comments of TestDocReferencesFindsStaleNames
// (parsed, never built). These name what exists: see Order, see Order.Less,
// see snapshot.Take, see sink.Sink.FindSnapshot, see docrefs.go, see
// DESIGN.md, see source/sqlserver; see below is English, not a reference.
// This one is stale: see LatestImage.
package docrefs

import "github.com/cdcsnap/cdcsnap/snapshot"

// Order is a type with one method; see Order.Merge (stale) and see sameValue.
type Order struct{ n int }

// Less is a method; see sameValu (stale).
func (o Order) Less(p Order) bool { return o.n < p.n && sameValue() }

func sameValue() bool { return true }

// take is used; see snapshot.LatestImage (stale) and see nosuch.go (stale).
var take = snapshot.Take
