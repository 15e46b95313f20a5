package storage

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
)

// ExportFormat is the schema version of memgate's JSON Lines export. An
// export begins with a header line {"memgate_export": ExportFormat}; every
// other line is one memory as clients see it.
const ExportFormat = 1

// Export writes up to limit memories (0: all) as JSON Lines to w, oldest
// write first, starting after cursor, and returns how many it wrote and the
// cursor of the next page ("" at the end). The first page starts with the
// header line, so the pages of one export concatenate into one valid file.
func (s *Store) Export(ctx context.Context, w io.Writer, cursor string, limit int) (int, string, error) {
	bw := bufio.NewWriter(w)
	var werr error
	n, next, err := s.ExportLines(ctx, cursor, limit, func(line []byte) bool {
		if werr == nil {
			_, werr = bw.Write(line)
		}
		return werr == nil
	})
	if err == nil {
		err = werr
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return 0, "", memgate.AsError("storage.Export", err)
	}
	return n, next, nil
}

// ExportLines is Export line by line: it hands take each line (its newline
// included) — the header line first on the first page — and take reports
// whether the line still fits in the page. A memory line that does not fit
// ends the page before it, with a cursor that starts the next page at it;
// the header and the first memory of a page are always taken.
//
// The lines follow the order of writes: a memory replaced while an export
// goes on page by page moves past the cursor and comes again, at its newest
// version, on a later page (Import keeps the newest of the lines of one id),
// so the pages restore a state no older than the first page.
func (s *Store) ExportLines(ctx context.Context, cursor string, limit int, take func(line []byte) bool) (int, string, error) {
	const op = "storage.Export"
	if err := s.fresh(ctx, op); err != nil {
		return 0, "", err
	}
	if limit < 0 {
		return 0, "", memgate.Invalid("limit", "limit must not be negative")
	}
	var after []byte
	if cursor != "" {
		var err error
		if after, err = decodeCursor(cursor, cursorExport, 8); err != nil {
			return 0, "", err
		}
	}
	if err := cancelled(ctx); err != nil {
		return 0, "", err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if after == nil {
		if err := enc.Encode(map[string]int{"memgate_export": ExportFormat}); err != nil {
			return 0, "", memgate.Internal(op, err)
		}
		take(buf.Bytes())
	}
	count, next := 0, ""
	clock := s.lazyNow()
	err := s.readTx(op, func(tx *bolt.Tx) error {
		t := s.txn(tx)
		c := t.docs.Cursor()
		for k, v := first(c, after, false); k != nil; k, v = c.Next() {
			if count > 0 && count%1024 == 0 {
				if err := cancelled(ctx); err != nil {
					return err
				}
			}
			if len(k) != 8 {
				return errBadRecord
			}
			doc := binary.BigEndian.Uint64(k)
			if limit > 0 && count == limit {
				next = encodeCursor(cursorExport, u64(doc-1))
				return nil
			}
			r, err := s.decodeRecord(k, v)
			if err != nil {
				return err
			}
			if r.expiredBy(clock) {
				continue
			}
			m, err := r.memory(doc)
			if err != nil {
				return err
			}
			buf.Reset()
			if err := enc.Encode(m); err != nil {
				return err
			}
			if !take(buf.Bytes()) && count > 0 {
				next = encodeCursor(cursorExport, u64(doc-1))
				return nil
			}
			count++
		}
		return nil
	})
	if err != nil {
		return 0, "", memgate.AsError(op, err)
	}
	return count, next, nil
}

// Conflict policies for Import: what to do with a memory whose id exists.
const (
	ImportSkip      = "skip"
	ImportOverwrite = "overwrite"
	ImportFail      = "fail"
)

// ImportReport says what an import did. Superseded counts the lines that
// a later line of the same id replaced: an export taken during writes holds
// a memory replaced meanwhile twice, and the newest is kept.
type ImportReport struct {
	Imported   int `json:"imported"`
	Skipped    int `json:"skipped"`
	Superseded int `json:"superseded"`
	Expired    int `json:"expired"` // lines of memories already expired, left out
	Lines      int `json:"lines"`
}

// utf8BOM is the byte order mark an import skips at the start of its input.
var utf8BOM = []byte("\ufeff")

// importBatch is how many memories share one transaction during an import.
const importBatch = 1000

// minImportLine is the least bound of one line of an import.
const minImportLine = 4 << 20

// importLine bounds one line of an import: at least minImportLine, and
// room for any memory this store takes as its export writes it — a text
// of MaxTextBytes whose every byte is escaped (\u0001 is six), beside
// the other fields' few kilobytes at most.
func (s *Store) importLine() int {
	return max(minImportLine, 6*s.opts.MaxTextBytes+1<<20)
}

// Import reads JSON Lines from r: memgate's own export, or the knowledge
// graph of the reference MCP memory server (memory.jsonl: entity and
// relation lines), and writes the memories in batches of importBatch per
// commit. onConflict is ImportSkip (the default), ImportOverwrite or
// ImportFail, for memories the store held before. Every line becomes a
// memory or stops the import with invalid_argument (or too_large) naming
// the line and the field; batches committed before it stay, as the report
// counts.
//
// Lines of one id are one memory: the newest wins (the higher version, then
// the later updated_at, then the later line), whichever policy applies, so
// an export taken in pages during writes restores each memory at its
// newest version.
//
// A knowledge-graph entity becomes one memory: its name is the id and title,
// its observations (and its relations, as "relation: target" lines) are the
// text, its entity type is a tag.
func (s *Store) Import(ctx context.Context, r io.Reader, onConflict string) (ImportReport, error) {
	const op = "storage.Import"
	var rep ImportReport
	switch onConflict {
	case "":
		onConflict = ImportSkip
	case ImportSkip, ImportOverwrite, ImportFail:
	default:
		return rep, memgate.Invalid("on_conflict", "on_conflict must be skip, overwrite or fail")
	}
	if s.repl != nil && !applying(ctx) {
		body, err := readBody(r, maxImportEntry)
		if err != nil {
			return rep, err
		}
		before := s.commits.Load()
		e := &entry{Kind: opImport, Body: body, OnConflict: onConflict}
		err = s.replicate(ctx, op, e, func(ctx context.Context) (err error) {
			rep, err = s.Import(ctx, bytes.NewReader(body), onConflict)
			return err
		}, func() bool { return s.commits.Load() != before })
		return rep, err
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), s.importLine())
	var (
		batch []importItem
		graph = newGraph()
		seen  = map[string]*seenID{}
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		imported, skipped, quota, err := s.importBatch(ctx, batch, onConflict)
		if err != nil {
			if ctx.Err() != nil && rep.Imported+rep.Skipped > 0 {
				return &memgate.Error{Code: memgate.CodeUnavailable, Cause: err,
					Message: "the import was interrupted (its request ended, or the server is stopping); what its report counts was imported before, and stays"}
			}
			return err
		}
		rep.Imported += imported
		rep.Skipped += skipped
		if quota != nil {
			return quota
		}
		for _, item := range batch {
			if sn := seen[item.w.ID]; sn != nil {
				sn.pending, sn.written = -1, !item.skipped
			}
		}
		batch = batch[:0]
		return nil
	}
	add := func(item importItem) error {
		if item.w.ID != "" {
			if prev := seen[item.w.ID]; prev != nil {
				switch {
				case !prev.written && prev.pending < 0:
					rep.Skipped++ // the store's own memory, which the policy keeps
					return nil
				case !item.newer(prev):
					rep.Superseded++ // an older line of a memory already read
					return nil
				case prev.pending >= 0:
					rep.Superseded++
					prev.note(item)
					item.supersede = batch[prev.pending].supersede
					batch[prev.pending] = item
					return nil
				}
				rep.Superseded++
				item.supersede = true
			}
			sn := &seenID{}
			sn.note(item)
			sn.pending = len(batch)
			seen[item.w.ID] = sn
		}
		batch = append(batch, item)
		if len(batch) == importBatch {
			return flush()
		}
		return nil
	}
	for sc.Scan() {
		rep.Lines++
		line := sc.Bytes()
		if rep.Lines == 1 {
			line = bytes.TrimPrefix(line, utf8BOM) // as some editors save UTF-8
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		item, isGraph, err := s.parseLine(line, rep.Lines, graph)
		if err != nil {
			return rep, lineError(rep.Lines, err)
		}
		if isGraph || item == nil {
			continue
		}
		if item.w.ExpiresAt != nil && memgate.ExpiredBy(item.w.ExpiresAt, s.now()) {
			rep.Expired++
			continue
		}
		item.line = rep.Lines
		if err := add(*item); err != nil {
			return rep, memgate.AsError(op, err)
		}
	}
	if err := sc.Err(); err != nil {
		return rep, lineError(rep.Lines+1, memgate.Invalid("line", "line is unreadable or longer than %d bytes", s.importLine()))
	}
	items, err := graph.items(s.opts.MaxTextBytes)
	if err != nil {
		return rep, err
	}
	for _, item := range items {
		if err := add(item); err != nil {
			return rep, memgate.AsError(op, err)
		}
	}
	if err := flush(); err != nil {
		return rep, memgate.AsError(op, err)
	}
	return rep, nil
}

// seenID is what an import remembers of an id it has read: the newest line
// of it so far, whether that line still waits in the batch (its index) or
// was written.
type seenID struct {
	version, updated int64
	pending          int
	written          bool
}

func (sn *seenID) note(item importItem) { sn.version, sn.updated = item.version, item.updated }

// newer reports whether item, read after the line sn holds, replaces it.
func (item importItem) newer(sn *seenID) bool {
	if item.version != sn.version {
		return item.version > sn.version
	}
	return item.updated >= sn.updated
}

func lineError(line int, err error) error {
	e := memgate.AsError("storage.Import", err)
	if e.Code == memgate.CodeInternal {
		return e
	}
	details := map[string]any{"line": line}
	for k, v := range e.Details {
		details[k] = v
	}
	return &memgate.Error{Code: e.Code, Message: fmt.Sprintf("line %d: %s", line, e.Message), Details: details, Cause: e.Cause}
}

type importItem struct {
	w                memgate.Write
	p                prepared
	created, updated int64 // 0: now
	version          int64 // the version the line carries, 0 when none
	line             int
	// supersede marks a newer line of a memory this import wrote: it
	// replaces it whatever the policy.
	supersede bool
	skipped   bool // set by importBatch: the policy kept the store's memory
}

// Fields of a memory line of an export, and of knowledge-graph lines.
var (
	exportFields   = []string{"id", "text", "bytes", "title", "tags", "metadata", "created_at", "updated_at", "version", "expires_at", "source"}
	entityFields   = []string{"type", "name", "entityType", "observations"}
	relationFields = []string{"type", "from", "to", "relationType"}
)

func (s *Store) parseLine(line []byte, n int, g *graph) (*importItem, bool, error) {
	o, err := strictObject(line, "line")
	if err != nil {
		return nil, false, err
	}
	if v, ok := o["memgate_export"]; ok {
		var format int
		if err := json.Unmarshal(v, &format); err != nil || format < 1 || format > ExportFormat {
			return nil, false, memgate.Invalid("memgate_export", "unknown export format; upgrade memgate to import it")
		}
		return nil, true, o.only("the header line", "memgate_export")
	}
	if _, ok := o["type"]; ok {
		return nil, true, g.add(o, n)
	}
	if err := o.only("a memory line", exportFields...); err != nil {
		return nil, false, err
	}
	text, ok, err := o.str("text")
	switch {
	case err != nil:
		return nil, false, err
	case !ok:
		return nil, false, memgate.Invalid("text", "memory line has no text")
	}
	w := memgate.Write{Text: text, AllowEmpty: true}
	if w.ID, _, err = o.str("id"); err != nil {
		return nil, false, err
	}
	if w.Title, _, err = o.str("title"); err != nil {
		return nil, false, err
	}
	if w.Tags, err = o.strs("tags"); err != nil {
		return nil, false, err
	}
	if w.Metadata, err = o.flat("metadata"); err != nil {
		return nil, false, err
	}
	if _, err := o.integer("bytes"); err != nil {
		return nil, false, err
	}
	expires, err := o.timestamp("expires_at")
	if err != nil {
		return nil, false, err
	}
	if expires != 0 {
		t := time.Unix(0, expires).UTC()
		w.ExpiresAt = &t
	}
	if w.Source, err = o.source("source"); err != nil {
		return nil, false, err
	}
	item := &importItem{}
	if item.version, err = o.integer("version"); err != nil {
		return nil, false, err
	}
	if item.created, err = o.timestamp("created_at"); err != nil {
		return nil, false, err
	}
	if item.updated, err = o.timestamp("updated_at"); err != nil {
		return nil, false, err
	}
	if item.created != 0 && item.updated != 0 && item.updated < item.created {
		return nil, false, memgate.Invalid("updated_at", "updated_at must not be earlier than created_at")
	}
	if item.w, err = w.Normalize(s.opts.MaxTextBytes); err != nil {
		return nil, false, err
	}
	return item, false, nil
}

// importBatch writes one batch in one commit.
// A write past a quota ends the batch where it is: what came before it is
// committed, and quota says why the import stops.
func (s *Store) importBatch(ctx context.Context, batch []importItem, onConflict string) (imported, skipped int, quota, err error) {
	for i := range batch {
		if batch[i].w.ID == "" {
			id, err := s.newID()
			if err != nil {
				return 0, 0, nil, err
			}
			batch[i].w.ID = id
		}
		if batch[i].p, err = s.prepare(batch[i].w); err != nil {
			return 0, 0, nil, err
		}
	}
	err = s.write.do(func(t *txn) error {
		imported, skipped, quota = 0, 0, nil
		if err := cancelled(ctx); err != nil {
			return err
		}
		if onConflict == ImportFail {
			// A refusal must come before the first change (see committer).
			if err := t.checkNew(batch); err != nil {
				return err
			}
		}
		now := s.now().UnixNano()
		for i := range batch {
			item := &batch[i]
			item.skipped = false
			old, oldDoc, err := t.lookup(item.w.ID)
			if err != nil {
				return err
			}
			if oldDoc != 0 && onConflict == ImportSkip && !item.supersede {
				item.skipped = true
				skipped++
				continue
			}
			if quota = t.checkQuota(oldDoc == 0, len(item.p.rec.text)-liveBytes(&old, oldDoc)); quota != nil {
				for j := i; j < len(batch); j++ {
					batch[j].skipped = true
				}
				return nil
			}
			doc, err := t.nextDoc()
			if err != nil {
				return err
			}
			created, updated := item.created, item.updated
			if created == 0 {
				created = now
			}
			if updated == 0 {
				updated = now
			}
			origin := doc
			if oldDoc != 0 {
				origin, created = old.origin, old.created
				if err := t.remove(&old, oldDoc, doc); err != nil {
					return err
				}
			}
			rec := item.p.rec
			rec.origin, rec.created, rec.updated = origin, created, updated
			if item.w.ExpiresAt != nil {
				rec.expires = item.w.ExpiresAt.UnixNano()
			}
			if err := t.insert(&rec, doc, &item.p); err != nil {
				return err
			}
			if !item.supersede {
				imported++
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, nil, err
	}
	return imported, skipped, quota, nil
}

// checkNew refuses the batch if any of its ids exists (a newer line of a
// memory this import wrote aside).
func (t *txn) checkNew(batch []importItem) error {
	for _, item := range batch {
		if item.supersede {
			continue
		}
		_, doc, err := t.lookup(item.w.ID)
		if err != nil {
			return err
		}
		if doc != 0 {
			return lineError(item.line, &memgate.Error{Code: memgate.CodeVersionConflict,
				Message: "a memory with this id already exists (on_conflict is fail)",
				Details: map[string]any{"current_version": doc}})
		}
	}
	return nil
}

// graph gathers the reference server's entities and relations: relations
// may come before or after the entities they join.
type graph struct {
	order    []string
	entities map[string]*entity
	related  map[string][]relation
}

// entity is one entity of the graph, with the line that first named it.
type entity struct {
	entityType   string
	observations []string
	line         int
}

type relation struct {
	text string
	line int
}

func newGraph() *graph {
	return &graph{entities: map[string]*entity{}, related: map[string][]relation{}}
}

// add reads one line of the graph, line n.
func (g *graph) add(o object, n int) error {
	kind, _, err := o.str("type")
	if err != nil {
		return err
	}
	switch kind {
	case "entity":
		if err := o.only("an entity line", entityFields...); err != nil {
			return err
		}
		name, _, err := o.str("name")
		if err != nil {
			return err
		}
		if err := memgate.ValidateID("name", name); err != nil {
			return err
		}
		typ, _, err := o.str("entityType")
		if err != nil {
			return err
		}
		obs, err := o.strs("observations")
		if err != nil {
			return err
		}
		if e, ok := g.entities[name]; ok {
			if typ != "" && e.entityType != "" && typ != e.entityType {
				return memgate.Invalid("entityType", "the entity was given another entityType on an earlier line")
			}
			if e.entityType == "" {
				e.entityType = typ
			}
			e.observations = append(e.observations, obs...)
			return nil
		}
		g.order = append(g.order, name)
		g.entities[name] = &entity{entityType: typ, observations: obs, line: n}
	case "relation":
		if err := o.only("a relation line", relationFields...); err != nil {
			return err
		}
		var from, to, rel string
		for _, f := range []struct {
			name string
			v    *string
		}{{"from", &from}, {"to", &to}, {"relationType", &rel}} {
			v, _, err := o.str(f.name)
			if err != nil {
				return err
			}
			if v == "" {
				return memgate.Invalid(f.name, "a relation needs from, to and relationType")
			}
			*f.v = v
		}
		g.related[from] = append(g.related[from], relation{text: rel + ": " + to, line: n})
	default:
		return memgate.Invalid("type", "type must be entity or relation")
	}
	return nil
}

var notTagChar = regexp.MustCompile(`[^\p{L}\p{N}_\-.:/]+`)

// items turns the graph into memories, every entity one, each checked
// against the rules of a memory with a text of at most maxText bytes: a
// rule broken stops the import at the entity's first line, naming the
// field of the line (observations, name, entityType). A relation from an
// entity the graph lacks stops it at the relation's line.
func (g *graph) items(maxText int) ([]importItem, error) {
	for from, rels := range g.related {
		if _, ok := g.entities[from]; !ok {
			return nil, lineError(rels[0].line, memgate.Invalid("from", "the relation starts at an entity that no entity line names"))
		}
	}
	fields := map[string]string{"text": "observations", "title": "name", "id": "name", "tags": "entityType", "metadata": "entityType"}
	out := make([]importItem, 0, len(g.order))
	for _, name := range g.order {
		e := g.entities[name]
		lines := append([]string{}, e.observations...)
		for _, r := range g.related[name] {
			lines = append(lines, r.text)
		}
		text := strings.Join(lines, "\n")
		if strings.TrimSpace(text) == "" {
			text = name
		}
		w := memgate.Write{ID: name, Text: text, Metadata: map[string]any{"source": "memory.jsonl"}}
		if title := []rune(name); len(title) <= memgate.MaxTitleChars {
			w.Title = name
		}
		if tag := notTagChar.ReplaceAllString(e.entityType, "-"); tag != "" {
			if r := []rune(tag); len(r) > memgate.MaxTagChars {
				tag = string(r[:memgate.MaxTagChars])
			}
			w.Tags = []string{tag}
			w.Metadata["entity_type"] = e.entityType
		}
		nw, err := w.Normalize(maxText)
		if err != nil {
			ge := memgate.AsError("storage.Import", err)
			if f, ok := ge.Details["field"].(string); ok && fields[f] != "" {
				d := map[string]any{}
				for k, v := range ge.Details {
					d[k] = v
				}
				d["field"] = fields[f]
				ge = &memgate.Error{Code: ge.Code, Message: ge.Message, Details: d}
			}
			return nil, lineError(e.line, ge)
		}
		out = append(out, importItem{w: nw, line: e.line})
	}
	return out, nil
}

// Backup writes a consistent copy of the store to w while it stays live:
// writers go on, the copy reflects one committed state.
func (s *Store) Backup(ctx context.Context, w io.Writer) (int64, error) {
	const op = "storage.Backup"
	if err := cancelled(ctx); err != nil {
		return 0, err
	}
	if err := s.fresh(ctx, op); err != nil {
		return 0, err
	}
	var n int64
	ew := &firstError{w: w}
	err := s.readTx(op, func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(ew)
		switch {
		case err != nil && ew.err != nil:
			// The writer's own error: bbolt words some of them anew, which
			// loses what they were (a full disk, a client gone).
			err = ew.err
		case errors.Is(err, io.EOF): // bbolt read the file to its end before its last page
			err = fmt.Errorf("%w: the file is shorter than its pages", ErrDamaged)
		}
		return err
	})
	return n, memgate.Wrap(op, err)
}

// firstError is a writer that keeps the first error of the one it writes
// to.
type firstError struct {
	w   io.Writer
	err error
}

func (f *firstError) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil && f.err == nil {
		f.err = err
	}
	return n, err
}

// backupSyncEvery is how many bytes of a backup file are written between
// syncs. Left to pile up, a whole store's worth of dirty pages is flushed by
// the next fsync on the filesystem, which is a writer's commit (ext4 orders
// data before the journal): synced as it goes, each commit waits for a few
// MiB at most.
const backupSyncEvery = 4 << 20

// syncEvery writes to f and syncs it every so many bytes.
type syncEvery struct {
	f       *os.File
	every   int64
	pending int64
}

func (w *syncEvery) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.pending += int64(n)
	if err == nil && w.pending >= w.every {
		w.pending = 0
		err = w.f.Sync()
	}
	return n, err
}

// BackupInto writes a consistent copy of the store into f, syncing it as
// it goes and at the end.
func (s *Store) BackupInto(ctx context.Context, f *os.File) (int64, error) {
	n, err := s.Backup(ctx, &syncEvery{f: f, every: backupSyncEvery})
	if err == nil {
		if err = f.Sync(); err != nil {
			err = StoreError("storage.Backup", err)
		}
	}
	return n, err
}

// BackupFile writes a consistent copy of the store to path: into a temporary
// file beside it, synced, then renamed, so path is either absent or whole.
func (s *Store) BackupFile(ctx context.Context, path string) (int64, error) {
	const op = "storage.Backup"
	f, err := os.CreateTemp(filepath.Dir(path), ".memgate-backup-*")
	if err != nil {
		return 0, StoreError(op, err)
	}
	defer os.Remove(f.Name())
	n, err := s.BackupInto(ctx, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return 0, StoreError(op, err)
	}
	return n, nil
}
