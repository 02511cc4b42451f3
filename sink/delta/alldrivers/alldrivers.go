// Package alldrivers registers gocloud.dev's blob drivers for every cloud
// store sink/delta writes to, so blobstore.Open (package
// sink/delta/blobstore) takes s3://, gs:// and azblob:// URLs:
//
//	import _ "github.com/cdcsnap/cdcsnap/sink/delta/alldrivers"
//
// A program that writes to one store imports only that store's driver
// (_ "gocloud.dev/blob/s3blob", gcsblob or azureblob), and one that writes
// to a local folder or mem:// none: each driver links its cloud's SDK
// (the three together, with gRPC and OpenTelemetry's exporters, are most
// of a program's size).
package alldrivers

import (
	_ "gocloud.dev/blob/azureblob" // azblob://container/path
	_ "gocloud.dev/blob/gcsblob"   // gs://bucket/path
	_ "gocloud.dev/blob/s3blob"    // s3://bucket/path
)
