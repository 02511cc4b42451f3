package deltalog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/cdcsnap/cdcsnap/internal/pqfile"
)

// LogDir is the folder of the transaction log below the table root.
const LogDir = "_delta_log/"

// Log reads and writes the transaction log of one Delta table in a
// bucket. It is safe for concurrent use.
type Log struct {
	// URL names the table in errors and logs.
	URL string
	// Store holds the table's objects.
	Store Store
	// LocalRoot is a local table's folder, else "": its log files are
	// then written through the file system (a commit's put-if-absent is
	// a hard link, atomic across processes).
	LocalRoot string
	// syncDirs is localstore.SyncDirs; tests watch or fail it.
	syncDirs func(root, dir string) error
	// Logger receives debug and warning messages. Nil means silent.
	Logger *slog.Logger
	// CheckTxn, when set, refuses a txn action of a commit or checkpoint
	// being replayed: the log file is then corrupt (a record of the
	// table's writer that does not parse must stop the reader).
	CheckTxn func(Txn) error
	// CheckCommit, when set, refuses a commit being replayed by its
	// actions: the commit file is then corrupt.
	CheckCommit func([]Action) error

	// condMu guards condChecked: the store was seen to honour put-if-absent.
	condMu      sync.Mutex
	condChecked bool
}

func (l *Log) logger() *slog.Logger {
	if l.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l.Logger
}

// checkTxn applies CheckTxn to a's txn, if it is one.
func (l *Log) checkTxn(a *Action) error {
	if a.Txn == nil || l.CheckTxn == nil {
		return nil
	}
	return l.CheckTxn(*a.Txn)
}

// State is the table replayed up to Version. A State is never modified
// once built (Load returns the cached base itself when nothing changed):
// Clone it to apply more actions.
type State struct {
	Version  int64                  // -1: no table yet
	Protocol *Protocol              // the latest protocol action
	Meta     *MetaData              // the latest metaData action
	Schema   Schema                 // Meta's schema, parsed
	Files    map[string]*AddFile    // the live files by path
	Removes  map[string]*RemoveFile // tombstones by path and deletion vector
	Txns     map[string]Txn         // the latest txn of each appId
	Domains  map[string]string      // domainMetadata: configuration by domain
}

// TypeWidening reports whether the table widens columns: the stable
// typeWidening feature in its protocol and delta.enableTypeWidening set
// (PROTOCOL.md "Type Widening": the feature is active when both hold).
// A table with only typeWidening-preview is not widened: the preview's
// readers take fewer type changes (Delta 3.2 and 3.3: byte to short to
// int, docs.delta.io "Delta type widening") and read each
// delta.typeChanges entry's tableVersion, which Evolve does not write
// (TypeWideningPreview).
func (s *State) TypeWidening() bool {
	return s.typeWideningEnabled() && HasWriterFeature(s.Protocol, "typeWidening")
}

// TypeWideningPreview reports whether the table has type widening
// enabled under the preview feature only (typeWidening-preview), which
// TypeWidening does not widen.
func (s *State) TypeWideningPreview() bool {
	return s.typeWideningEnabled() && !HasWriterFeature(s.Protocol, "typeWidening") && HasWriterFeature(s.Protocol, "typeWidening-preview")
}

func (s *State) typeWideningEnabled() bool {
	return s.Meta != nil && strings.EqualFold(s.Meta.Configuration["delta.enableTypeWidening"], "true")
}

// EmptyState is the state of a table that does not exist yet.
func EmptyState() *State {
	return &State{Version: -1, Files: map[string]*AddFile{}, Removes: map[string]*RemoveFile{}, Txns: map[string]Txn{}, Domains: map[string]string{}}
}

// Clone returns a copy of s that Apply can change without changing s.
func (s *State) Clone() *State {
	c := *s
	c.Files = make(map[string]*AddFile, len(s.Files))
	for k, v := range s.Files {
		c.Files[k] = v
	}
	c.Removes = make(map[string]*RemoveFile, len(s.Removes))
	for k, v := range s.Removes {
		c.Removes[k] = v
	}
	c.Txns = maps.Clone(s.Txns)
	c.Domains = maps.Clone(s.Domains)
	return &c
}

// Apply applies one action to s, as a reader replaying the log does.
func (s *State) Apply(a *Action) error {
	switch {
	// A logical file is (path, deletion vector): the newest add of a path
	// is live, and a remove drops it only if it names the same vector
	// (Action Reconciliation in PROTOCOL.md), whatever the order of the
	// two in one commit.
	case a.Add != nil:
		s.Files[a.Add.Path] = a.Add
		delete(s.Removes, a.Add.Path+"\x00"+a.Add.DeletionVector.UniqueID())
	case a.Remove != nil:
		if f, ok := s.Files[a.Remove.Path]; ok && f.DeletionVector.UniqueID() == a.Remove.DeletionVector.UniqueID() {
			delete(s.Files, a.Remove.Path)
		}
		s.Removes[a.Remove.Path+"\x00"+a.Remove.DeletionVector.UniqueID()] = a.Remove
	case a.MetaData != nil:
		sc, err := parseSchema(a.MetaData.SchemaString)
		if err != nil {
			return err
		}
		s.Meta, s.Schema = a.MetaData, sc
	case a.Protocol != nil:
		s.Protocol = a.Protocol
	case a.DomainMetadata != nil && string(a.DomainMetadata) != "null":
		var d DomainMetadata
		if err := json.Unmarshal(a.DomainMetadata, &d); err != nil {
			return fmt.Errorf("domainMetadata: %w", err)
		}
		if d.Removed {
			delete(s.Domains, d.Domain)
		} else {
			s.Domains[d.Domain] = d.Configuration
		}
	case a.Txn != nil:
		s.Txns[a.Txn.AppID] = *a.Txn
	}
	return nil
}

// RowIDHighWaterMark is the highest row id assigned so far, -1 for none.
func (s *State) RowIDHighWaterMark() (int64, error) {
	conf, ok := s.Domains[RowTrackingDomain]
	if !ok {
		return -1, nil
	}
	var c struct {
		HWM *int64 `json:"rowIdHighWaterMark"`
	}
	if err := json.Unmarshal([]byte(conf), &c); err != nil || c.HWM == nil {
		return 0, fmt.Errorf("delta: domain %s has configuration %q, want {\"rowIdHighWaterMark\": n}", RowTrackingDomain, conf)
	}
	return *c.HWM, nil
}

// SortedFiles returns the live files ordered by path.
func (s *State) SortedFiles() []AddFile {
	out := make([]AddFile, 0, len(s.Files))
	for _, f := range s.Files {
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

var (
	reCommit     = regexp.MustCompile(`^(\d{20})\.json$`)
	reCheckpoint = regexp.MustCompile(`^(\d{20})\.checkpoint\.parquet$`)
	reMultipart  = regexp.MustCompile(`^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$`)
	reV2         = regexp.MustCompile(`^(\d{20})\.checkpoint\.[0-9a-fA-F-]{36}\.(json|parquet)$`)
)

// listing is what _delta_log holds.
type listing struct {
	commits map[int64]bool
	// classic maps a version to its complete classic checkpoint files
	// (one, or every part of a multi-part one, in part order).
	classic map[int64][]string
	// v2 maps a version to a UUID-named (v2 spec) checkpoint file.
	v2     map[int64]string
	latest int64 // -1 when the log is empty
}

// CommitKey is the object key of commit v.
func CommitKey(v int64) string { return fmt.Sprintf("%s%020d.json", LogDir, v) }

func (l *Log) list(ctx context.Context) (*listing, error) {
	ls := &listing{commits: map[int64]bool{}, classic: map[int64][]string{}, v2: map[int64]string{}, latest: -1}
	parts := map[int64]map[int]map[int]string{} // version -> total -> part -> key
	names, err := l.listLog(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		key := LogDir + name
		if m := reCommit.FindStringSubmatch(name); m != nil {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			ls.commits[v] = true
			ls.latest = max(ls.latest, v)
		} else if m := reCheckpoint.FindStringSubmatch(name); m != nil {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			ls.classic[v] = []string{key}
			ls.latest = max(ls.latest, v)
		} else if m := reMultipart.FindStringSubmatch(name); m != nil {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			p, _ := strconv.Atoi(m[2])
			n, _ := strconv.Atoi(m[3])
			if parts[v] == nil {
				parts[v] = map[int]map[int]string{}
			}
			if parts[v][n] == nil {
				parts[v][n] = map[int]string{}
			}
			parts[v][n][p] = key
			// even an incomplete checkpoint says the table reached v
			ls.latest = max(ls.latest, v)
		} else if m := reV2.FindStringSubmatch(name); m != nil {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			if k, ok := ls.v2[v]; !ok || key < k {
				ls.v2[v] = key // two for one version hold the same state: take either
			}
			ls.latest = max(ls.latest, v)
		}
	}
	for v, byTotal := range parts {
		if _, ok := ls.classic[v]; ok {
			continue
		}
		for n, ps := range byTotal {
			if len(ps) != n {
				continue // incomplete multi-part checkpoint: ignore it
			}
			keys := make([]string, 0, n)
			complete := true
			for i := 1; i <= n; i++ {
				k, ok := ps[i]
				if !ok {
					complete = false
					break
				}
				keys = append(keys, k)
			}
			if complete {
				ls.classic[v] = keys
				ls.latest = max(ls.latest, v)
				break
			}
		}
	}
	return ls, nil
}

// listLog returns the names of the files in _delta_log.
func (l *Log) listLog(ctx context.Context) ([]string, error) {
	keys, err := l.ListKeys(ctx, LogDir, false)
	for i, k := range keys {
		keys[i] = strings.TrimPrefix(k, LogDir)
	}
	return keys, err
}

// ListKeys lists one level of the table's folder: the keys starting with
// prefix up to the next "/", files or (with dirs) folders, each folder's
// key ending in "/".
func (l *Log) ListKeys(ctx context.Context, prefix string, dirs bool) ([]string, error) {
	keys, err := l.Store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("delta: table %s: listing %s: %w", l.URL, prefix, err)
	}
	out := keys[:0]
	for _, k := range keys {
		if strings.HasSuffix(k, "/") == dirs {
			out = append(out, k)
		}
	}
	return out, nil
}

// Load replays the log up to version upTo (-1: the latest), starting from
// base when base's version is still reachable by JSON commits.
func (l *Log) Load(ctx context.Context, base *State, upTo int64) (*State, error) {
	s, err := l.load(ctx, base, upTo)
	var corrupt *CorruptLogError
	if errors.As(err, &corrupt) && corrupt.Table == "" {
		corrupt.Table = l.URL
	}
	return s, err
}

func (l *Log) load(ctx context.Context, base *State, upTo int64) (*State, error) {
	ls, err := l.list(ctx)
	if err != nil {
		return nil, err
	}
	target := ls.latest
	if upTo >= 0 {
		if upTo > ls.latest {
			return nil, fmt.Errorf("delta: table %s has no version %d (latest %d)", l.URL, upTo, ls.latest)
		}
		target = upTo
	}
	if target < 0 {
		return EmptyState(), nil
	}
	// Incremental: base plus the commits after it.
	if base != nil && base.Version == target {
		return base, nil // states are never modified once built
	}
	if base != nil && base.Version >= 0 && base.Version <= target {
		ok := true
		for v := base.Version + 1; v <= target; v++ {
			if !ls.commits[v] {
				ok = false
				break
			}
		}
		if ok {
			s := base.Clone()
			if err := l.replayCommits(ctx, s, base.Version+1, target); err != nil {
				return nil, err
			}
			return s, l.checkRead(s)
		}
	}
	// _last_checkpoint is a hint only: the listing decides which
	// checkpoint to start from (it may point at an older one, or be
	// missing), classic, multi-part or UUID-named (v2 spec).
	cp := int64(-1)
	var cpKeys []string
	for v, keys := range ls.classic {
		if v <= target && v > cp {
			cp, cpKeys = v, keys
		}
	}
	for v, key := range ls.v2 {
		if v <= target && v > cp {
			cp, cpKeys = v, []string{key}
		}
	}
	s := EmptyState()
	from := int64(0)
	if cp >= 0 {
		if err := l.readCheckpoint(ctx, s, cpKeys); err != nil {
			return nil, err
		}
		s.Version = cp
		from = cp + 1
		if err := l.checkRead(s); err != nil {
			return nil, err
		}
	}
	for v := from; v <= target; v++ {
		if !ls.commits[v] {
			return nil, &CorruptLogError{File: CommitKey(v), Err: fmt.Errorf("commit %d is missing (no checkpoint covers it; the log has versions up to %d)", v, target)}
		}
	}
	if err := l.replayCommits(ctx, s, from, target); err != nil {
		return nil, err
	}
	return s, l.checkRead(s)
}

func (l *Log) replayCommits(ctx context.Context, s *State, from, to int64) error {
	for v := from; v <= to; v++ {
		acts, err := l.ReadCommit(ctx, v)
		if err != nil {
			return err
		}
		for i := range acts {
			if acts[i].Protocol != nil {
				if err := l.checkProtocol(acts[i].Protocol); err != nil {
					return err
				}
			}
			if err := l.checkTxn(&acts[i]); err != nil {
				return &CorruptLogError{File: CommitKey(v), Err: err}
			}
			if err := s.Apply(&acts[i]); err != nil {
				return &CorruptLogError{File: CommitKey(v), Err: err}
			}
		}
		if l.CheckCommit != nil {
			if err := l.CheckCommit(acts); err != nil {
				return &CorruptLogError{File: CommitKey(v), Err: err}
			}
		}
		s.Version = v
	}
	return nil
}

// ReadCommit reads and parses commit v.
func (l *Log) ReadCommit(ctx context.Context, v int64) ([]Action, error) {
	key := CommitKey(v)
	b, err := l.Store.ReadAll(ctx, key)
	if err != nil {
		return nil, &CorruptLogError{File: key, Err: err}
	}
	return ParseCommit(key, b)
}

// ParseCommit parses a commit file (or a checkpoint in JSON), one action
// a line; key names it in errors, which are *CorruptLogError.
func ParseCommit(key string, b []byte) ([]Action, error) {
	var acts []Action
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<30)
	line := 0
	for sc.Scan() {
		line++
		l := bytes.TrimSpace(sc.Bytes())
		if len(l) == 0 {
			continue
		}
		var a Action
		if err := json.Unmarshal(l, &a); err != nil {
			return nil, &CorruptLogError{File: key, Err: fmt.Errorf("line %d: %w", line, err)}
		}
		acts = append(acts, a)
	}
	if err := sc.Err(); err != nil {
		return nil, &CorruptLogError{File: key, Err: err}
	}
	return acts, nil
}

// readCheckpoint applies every action of a classic (single or multi-part)
// Parquet checkpoint.
func (l *Log) readCheckpoint(ctx context.Context, s *State, keys []string) error {
	for len(keys) > 0 {
		key := keys[0]
		keys = keys[1:]
		b, err := l.Store.ReadAll(ctx, key)
		if err != nil {
			return &CorruptLogError{File: key, Err: err}
		}
		var acts []Action
		if strings.HasSuffix(key, ".json") {
			acts, err = ParseCommit(key, b) // a UUID-named checkpoint in JSON
		} else {
			acts, err = checkpointActions(b)
		}
		if err != nil {
			return &CorruptLogError{File: key, Err: err}
		}
		for i := range acts {
			// A v2 spec checkpoint may keep its add and remove actions in
			// sidecar files under _delta_log/_sidecars ("Sidecar File
			// Information" in PROTOCOL.md): read them after it.
			if sc := acts[i].Sidecar; len(sc) > 0 && string(sc) != "null" {
				var side struct {
					Path string `json:"path"`
				}
				if err := json.Unmarshal(sc, &side); err != nil || side.Path == "" {
					return &CorruptLogError{File: key, Err: fmt.Errorf("sidecar action %s: %v", sc, err)}
				}
				p, err := url.PathUnescape(side.Path)
				if err != nil || strings.Contains(p, "/") && !strings.HasPrefix(p, LogDir+"_sidecars/") {
					return &CorruptLogError{File: key, Err: fmt.Errorf("sidecar %q is not in %s_sidecars", side.Path, LogDir)}
				}
				if !strings.Contains(p, "/") {
					p = LogDir + "_sidecars/" + p
				}
				keys = append(keys, p)
				continue
			}
			if acts[i].Protocol != nil {
				if err := l.checkProtocol(acts[i].Protocol); err != nil {
					return err
				}
			}
			if err := l.checkTxn(&acts[i]); err != nil {
				return &CorruptLogError{File: key, Err: err}
			}
			if err := s.Apply(&acts[i]); err != nil {
				return &CorruptLogError{File: key, Err: err}
			}
		}
	}
	return nil
}

// checkpointActions decodes a checkpoint Parquet file: each row's value
// of each action column a reader applies (add, remove, metaData,
// protocol, txn, domainMetadata, sidecar; Delta PROTOCOL, "Checkpoints")
// becomes JSON, as arrow-go marshals the column pqarrow reads, and is
// decoded like a JSON commit's action; columns in the file's order. The
// typed copies of statistics and partition values are skipped: the
// action's JSON fields carry them.
func checkpointActions(b []byte) ([]Action, error) {
	pf, err := pqfile.Open(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	var names []string
	root := pf.MetaData().Schema.Root()
	for i := range root.NumFields() {
		switch n := root.Field(i).Name(); n {
		case "add", "remove", "metaData", "protocol", "txn", "domainMetadata", "sidecar":
			names = append(names, n)
		}
	}
	cols, err := pqfile.JSONColumns(pf, names, []string{"stats_parsed", "partitionValues_parsed"})
	if err != nil {
		return nil, err
	}
	var acts []Action
	for i, name := range names {
		for _, r := range cols[i] {
			if r == nil {
				continue
			}
			var a Action
			if err := json.Unmarshal([]byte(`{"`+name+`":`+string(r)+`}`), &a); err != nil {
				return nil, fmt.Errorf("column %s: %w", name, err)
			}
			acts = append(acts, a)
		}
	}
	return acts, nil
}

// supportedReaderFeature reports table features this reader may ignore.
func supportedReaderFeature(f string) bool {
	switch f {
	case "vacuumProtocolCheck", "deletionVectors", "timestampNtz", "v2Checkpoint", "columnMapping",
		// Widened columns read through the cast every file's column gets
		// to the table's type (sink/delta's tableReader.adapt).
		"typeWidening", "typeWidening-preview":
		return true
	}
	return false
}

func (l *Log) checkProtocol(p *Protocol) error {
	var unsupported []string
	for _, f := range p.ReaderFeatures {
		if !supportedReaderFeature(f) {
			unsupported = append(unsupported, f)
		}
	}
	if len(unsupported) > 0 {
		return &UnsupportedProtocolError{Table: l.URL, Feature: strings.Join(unsupported, ",")}
	}
	switch {
	case p.MinReaderVersion <= 1:
		return nil
	case p.MinReaderVersion == 2, p.MinReaderVersion == 3:
		return nil // 2 is column mapping
	default:
		return &UnsupportedProtocolError{Table: l.URL, Feature: fmt.Sprintf("minReaderVersion=%d", p.MinReaderVersion)}
	}
}

func (l *Log) checkRead(s *State) error {
	if s.Version < 0 {
		return nil
	}
	if s.Protocol == nil {
		return &CorruptLogError{File: CommitKey(s.Version), Err: fmt.Errorf("no protocol action up to version %d", s.Version)}
	}
	if s.Meta == nil {
		return &CorruptLogError{File: CommitKey(s.Version), Err: fmt.Errorf("no metaData action up to version %d", s.Version)}
	}
	if err := l.checkProtocol(s.Protocol); err != nil {
		return err
	}
	if _, err := s.Mapping(); err != nil {
		return &UnsupportedProtocolError{Table: l.URL, Feature: "columnMapping: " + err.Error()}
	}
	return nil
}
