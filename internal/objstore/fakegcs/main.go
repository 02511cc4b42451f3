// Command fakegcs runs fake-gcs-server (Go module
// github.com/fsouza/fake-gcs-server, in memory) on 127.0.0.1:PORT with one
// bucket, for internal/objstore's StartGCS. It runs as a program of its
// own, not inside the tests: fake-gcs-server imports pubsub, whose
// opencensus dependency starts a goroutine at init that goleak would
// report in every test binary linking it.
//
// Usage: fakegcs -port PORT -bucket NAME. It prints "ready" once it
// listens and serves until killed.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

func main() {
	port := flag.Int("port", 0, "loopback port to listen on")
	bucket := flag.String("bucket", "lake", "bucket to create")
	flag.Parse()
	if *port <= 0 || *port > 65535 {
		fmt.Fprintln(os.Stderr, "fakegcs: -port is required")
		os.Exit(2)
	}
	// The storage client reads objects through the XML API at
	// http://HOST/bucket/object, which fake-gcs-server routes only for
	// requests to PublicHost (by default storage.googleapis.com).
	host := fmt.Sprintf("127.0.0.1:%d", *port)
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme:     "http",
		Host:       "127.0.0.1",
		Port:       uint16(*port),
		PublicHost: host,
		Writer:     io.Discard,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakegcs:", err)
		os.Exit(1)
	}
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: *bucket})
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	srv.Stop()
}
