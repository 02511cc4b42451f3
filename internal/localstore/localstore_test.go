package localstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"

	"github.com/cdcsnap/cdcsnap/internal/bucketstore"
	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/internal/localstore"
)

// fileblobOpts are the options sink/delta opened local tables with
// before it had its own folder store.
var fileblobOpts = &fileblob.Options{Metadata: fileblob.MetadataDontWrite, NoTempDir: true}

// stores are the implementations of the Store contract: this package's
// two, and gocloud.dev's buckets through the adapter (the reference the
// contract was written from).
func stores(t *testing.T) map[string]deltalog.Store {
	t.Helper()
	fb, err := fileblob.OpenBucket(t.TempDir(), fileblobOpts)
	if err != nil {
		t.Fatal(err)
	}
	mb := memblob.OpenBucket(nil)
	t.Cleanup(func() { fb.Close(); mb.Close() })
	return map[string]deltalog.Store{
		"dir":      localstore.NewDir(t.TempDir()),
		"mem":      localstore.NewMem(),
		"fileblob": bucketstore.New(fb, "file:///fb", false),
		"memblob":  bucketstore.New(mb, "mem://", false),
	}
}

// TestContract runs each method of every store through its documented
// behaviour: whole and ranged reads, sizes, missing objects under
// fs.ErrNotExist, replace, put-if-absent under fs.ErrExist, delete.
func TestContract(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			missing := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s of a missing object: %v, want fs.ErrNotExist", what, err)
				}
			}
			_, err := s.ReadAll(ctx, "a/none")
			missing("ReadAll", err)
			_, err = s.Size(ctx, "a/none")
			missing("Size", err)
			_, err = s.NewRangeReader(ctx, "a/none", 0, 1)
			missing("NewRangeReader", err)
			missing("Delete", s.Delete(ctx, "a/none"))
			if ok, err := deltalog.Exists(ctx, s, "a/none"); ok || err != nil {
				t.Errorf("Exists(missing) = %v, %v", ok, err)
			}

			if err := deltalog.WriteAll(ctx, s, "a/b/obj", []byte("0123456789")); err != nil {
				t.Fatal(err)
			}
			if b, err := s.ReadAll(ctx, "a/b/obj"); err != nil || string(b) != "0123456789" {
				t.Errorf("ReadAll = %q, %v", b, err)
			}
			if n, err := s.Size(ctx, "a/b/obj"); err != nil || n != 10 {
				t.Errorf("Size = %d, %v", n, err)
			}
			for _, r := range []struct {
				off, n int64
				want   string
			}{{0, 3, "012"}, {4, 2, "45"}, {8, 5, "89"}, {10, 1, ""}} {
				rr, err := s.NewRangeReader(ctx, "a/b/obj", r.off, r.n)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(rr)
				rr.Close()
				if err != nil || string(got) != r.want {
					t.Errorf("range %d+%d = %q, %v; want %q", r.off, r.n, got, err, r.want)
				}
			}
			// A folder is no object.
			_, err = s.Size(ctx, "a/b")
			missing("Size of a folder", err)

			if err := deltalog.WriteAll(ctx, s, "a/b/obj", []byte("new")); err != nil {
				t.Fatal(err)
			}
			if b, _ := s.ReadAll(ctx, "a/b/obj"); string(b) != "new" {
				t.Errorf("after a replace: %q", b)
			}
			w, err := s.NewWriter(ctx, "a/b/obj", true)
			if err == nil {
				_, _ = w.Write([]byte("not this"))
				err = w.Close()
			}
			if !errors.Is(err, fs.ErrExist) {
				t.Errorf("put-if-absent of an existing key: %v, want fs.ErrExist", err)
			}
			if b, _ := s.ReadAll(ctx, "a/b/obj"); string(b) != "new" {
				t.Errorf("a refused put-if-absent changed the object: %q", b)
			}
			if err := s.Delete(ctx, "a/b/obj"); err != nil {
				t.Fatal(err)
			}
			_, err = s.ReadAll(ctx, "a/b/obj")
			missing("ReadAll after Delete", err)
			if keys, err := s.List(ctx, ""); err != nil || len(keys) != 0 {
				t.Errorf("List of an empty store = %q, %v", keys, err)
			}
		})
	}
}

// TestCancelledWriterLeavesNothing: a writer whose context is cancelled
// before Close fails and stores nothing, not even a temporary file.
func TestCancelledWriterLeavesNothing(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			for _, ifNotExist := range []bool{false, true} {
				ctx, cancel := context.WithCancel(context.Background())
				w, err := s.NewWriter(ctx, "d/part-0.parquet", ifNotExist)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write([]byte("half")); err != nil {
					t.Fatal(err)
				}
				cancel()
				if err := w.Close(); err == nil {
					t.Errorf("ifNotExist %v: Close after cancel succeeded", ifNotExist)
				}
				if keys, err := s.List(context.Background(), "d/"); err != nil || len(keys) != 0 {
					t.Errorf("ifNotExist %v: left %q, %v", ifNotExist, keys, err)
				}
			}
		})
	}
}

// TestPutIfAbsentRace: of writers racing to put one key if absent,
// exactly one wins, the others see fs.ErrExist, and the object is the
// winner's. Two Dir values on one folder stand for two processes.
func TestPutIfAbsentRace(t *testing.T) {
	dir := t.TempDir()
	all := stores(t)
	all["dir, two handles"] = localstore.NewDir(dir)
	other := localstore.NewDir(dir)
	for name, s := range all {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			const writers = 16
			errs := make([]error, writers)
			var wg sync.WaitGroup
			for i := range writers {
				wg.Go(func() {
					st := s
					if name == "dir, two handles" && i%2 == 1 {
						st = other
					}
					w, err := st.NewWriter(ctx, "_delta_log/00000000000000000001.json", true)
					if err == nil {
						_, _ = fmt.Fprintf(w, "writer %d", i)
						err = w.Close()
					}
					errs[i] = err
				})
			}
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner >= 0:
					t.Fatalf("writers %d and %d both won", winner, i)
				case err == nil:
					winner = i
				case !errors.Is(err, fs.ErrExist):
					t.Errorf("writer %d: %v, want fs.ErrExist", i, err)
				}
			}
			if winner < 0 {
				t.Fatal("no writer won")
			}
			if b, _ := s.ReadAll(ctx, "_delta_log/00000000000000000001.json"); string(b) != fmt.Sprintf("writer %d", winner) {
				t.Errorf("object %q, winner %d", b, winner)
			}
			if keys, _ := s.List(ctx, "_delta_log/"); len(keys) != 1 {
				t.Errorf("log holds %q, want the one commit", keys)
			}
		})
	}
}

// randomKeys returns up to n distinct keys of a table's shape (folders
// of partition values, names with the characters Delta paths hold, among
// them "-", "." and " " that sort before "/"), none a folder of another.
func randomKeys(r *rand.Rand, n int) []string {
	const alphabet = "ab_=-. %0"
	el := func() string {
		b := make([]byte, 1+r.IntN(3))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if s := string(b); s != "." && s != ".." {
			return s
		}
		return "x"
	}
	var keys []string
	isFile := map[string]bool{}
	isDir := map[string]bool{}
next:
	for range n {
		parts := make([]string, 1+r.IntN(3))
		for i := range parts {
			parts[i] = el()
		}
		for i := 1; i < len(parts); i++ {
			if isFile[strings.Join(parts[:i], "/")] {
				continue next
			}
		}
		key := strings.Join(parts, "/")
		if isFile[key] || isDir[key] {
			continue
		}
		for i := 1; i < len(parts); i++ {
			isDir[strings.Join(parts[:i], "/")] = true
		}
		isFile[key] = true
		keys = append(keys, key)
	}
	return keys
}

func listAll(t *testing.T, b *blob.Bucket, prefix string) []string {
	t.Helper()
	var keys []string
	it := b.List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})
	for {
		obj, err := it.Next(context.Background())
		if err == io.EOF {
			return keys
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, obj.Key)
	}
}

// TestListMatchesGocloud: on random key sets, Dir lists what fileblob
// lists on the same folder, and Mem what memblob lists, for every prefix
// (each key's every leading substring). Both are in byte order, as
// memblob's and the clouds' are; fileblob's order is the same set, and
// the same order whenever it is itself sorted: its one-step reordering of
// a folder and the names that sort before it (ListPaged) misses some, as
// on the keys a/x, a!/x and a!! it lists a!/, a!!, a/.
func TestListMatchesGocloud(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 40 {
		root := t.TempDir()
		dir := localstore.NewDir(root)
		mem := localstore.NewMem()
		mb := memblob.OpenBucket(nil)
		keys := randomKeys(r, 1+r.IntN(25))
		for _, k := range keys {
			for _, s := range []deltalog.Store{dir, mem, bucketstore.New(mb, "mem://", false)} {
				if err := deltalog.WriteAll(ctx, s, k, []byte(k)); err != nil {
					t.Fatalf("round %d: writing %q: %v", round, k, err)
				}
			}
		}
		fb, err := fileblob.OpenBucket(root, fileblobOpts)
		if err != nil {
			t.Fatal(err)
		}
		prefixes := map[string]bool{"": true}
		for _, k := range keys {
			for i := range len(k) {
				prefixes[k[:i+1]] = true
			}
		}
		for p := range prefixes {
			got, err := dir.List(ctx, p)
			if err != nil {
				t.Fatalf("round %d: Dir.List(%q): %v", round, p, err)
			}
			want := listAll(t, fb, p)
			if !slices.IsSorted(got) {
				t.Errorf("round %d: Dir.List(%q) = %q, not sorted", round, p, got)
			}
			if !slices.Equal(got, slices.Sorted(slices.Values(want))) {
				t.Errorf("round %d: Dir.List(%q) = %q, fileblob lists %q", round, p, got, want)
			}
			gotMem, err := mem.List(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if wantMem := listAll(t, mb, p); !slices.Equal(gotMem, wantMem) {
				t.Errorf("round %d: Mem.List(%q) = %q, memblob lists %q", round, p, gotMem, wantMem)
			}
		}
		fb.Close()
		mb.Close()
	}
}

// TestDirWritesWhatFileblobWrote: the same writes through Dir and through
// fileblob with sink/delta's former options leave the same files (names,
// bytes, modes) and nothing else, and each reads the other's.
func TestDirWritesWhatFileblobWrote(t *testing.T) {
	ctx := context.Background()
	a, b := t.TempDir(), t.TempDir()
	fb, err := fileblob.OpenBucket(b, fileblobOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	dir := localstore.NewDir(a)
	keys := []string{"_delta_log/00000000000000000000.json", "part-00000-x-c000.snappy.parquet",
		"day=2026-01-02/part-00001-y-c000.snappy.parquet", "name=a%20b/part-00002-z-c000.snappy.parquet",
		"_cdcsnap/partial/p/plan.json"}
	for _, k := range keys {
		if err := deltalog.WriteAll(ctx, dir, k, []byte("data of "+k)); err != nil {
			t.Fatal(err)
		}
		if err := fb.WriteAll(ctx, k, []byte("data of "+k), nil); err != nil {
			t.Fatal(err)
		}
	}
	tree := func(root string) map[string]string {
		out := map[string]string{}
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil || p == root {
				return err
			}
			info, err := e.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			v := info.Mode().String()
			if !e.IsDir() {
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				v += " " + string(data)
			}
			out[filepath.ToSlash(rel)] = v
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	ta, tb := tree(a), tree(b)
	if fmt.Sprint(ta) != fmt.Sprint(tb) {
		t.Errorf("Dir wrote\n%v\nfileblob wrote\n%v", ta, tb)
	}
	other := localstore.NewDir(b)
	for _, k := range keys {
		x, err1 := other.ReadAll(ctx, k)
		y, err2 := fb.ReadAll(ctx, k)
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Errorf("%s: Dir reads %q (%v), fileblob %q (%v)", k, x, err1, y, err2)
		}
	}
}

// TestDirRefusesKeysOutsideItsFolder: keys that would leave the folder,
// name it, or that fileblob would have escaped are errors, before any I/O.
func TestDirRefusesKeysOutsideItsFolder(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "t")
	if err := os.Mkdir(root, 0o777); err != nil {
		t.Fatal(err)
	}
	d := localstore.NewDir(root)
	for _, k := range []string{"", "../x", "a/../../x", "/etc/passwd", "a//b", "a/", "./a", "a\x01b"} {
		if _, err := d.NewWriter(ctx, k, false); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("NewWriter(%q): %v, want fs.ErrInvalid", k, err)
		}
		if _, err := d.ReadAll(ctx, k); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("ReadAll(%q): %v, want fs.ErrInvalid", k, err)
		}
	}
	if es, _ := os.ReadDir(filepath.Dir(root)); len(es) != 1 {
		t.Errorf("the folder's parent holds %d entries", len(es))
	}
}
