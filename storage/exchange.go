package storage

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
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
	const op = "storage.Export"
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
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if after == nil {
		if err := enc.Encode(map[string]int{"memgate_export": ExportFormat}); err != nil {
			return 0, "", memgate.Internal(op, err)
		}
	}
	count, next := 0, ""
	err := s.readTx(op, func(tx *bolt.Tx) error {
		t := s.txn(tx)
		c := t.docs.Cursor()
		for k, v := first(c, after, false); k != nil; k, v = c.Next() {
			if count > 0 && count%1024 == 0 {
				if err := cancelled(ctx); err != nil {
					return err
				}
			}
			if limit > 0 && count == limit {
				next = encodeCursor(cursorExport, u64(binary.BigEndian.Uint64(k)-1))
				return nil
			}
			r, err := s.decodeRecord(k, v)
			if err != nil {
				return err
			}
			m, err := r.memory(binary.BigEndian.Uint64(k))
			if err != nil {
				return err
			}
			if err := enc.Encode(m); err != nil {
				return err
			}
			count++
		}
		return nil
	})
	if err == nil {
		err = bw.Flush()
	}
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

// ImportReport says what an import did.
type ImportReport struct {
	Imported int `json:"imported"`
	Skipped  int `json:"skipped"`
	Lines    int `json:"lines"`
}

// importBatch is how many memories share one transaction during an import.
const importBatch = 1000

// maxImportLine bounds one line of an import.
const maxImportLine = 4 << 20

// Import reads JSON Lines from r: memgate's own export, or the knowledge
// graph of the reference MCP memory server (memory.jsonl: entity and
// relation lines), and writes the memories in batches of importBatch per
// commit. onConflict is ImportSkip (the default), ImportOverwrite or
// ImportFail. A bad line stops the import with invalid_argument naming the
// line; batches committed before it stay, as the report counts.
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
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxImportLine)
	var (
		batch []importItem
		graph = newGraph()
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		imported, skipped, err := s.importBatch(ctx, batch, onConflict)
		rep.Imported += imported
		rep.Skipped += skipped
		batch = batch[:0]
		return err
	}
	for sc.Scan() {
		rep.Lines++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		item, isGraph, err := s.parseLine(line, graph)
		if err != nil {
			return rep, lineError(rep.Lines, err)
		}
		if isGraph {
			continue
		}
		if item != nil {
			item.line = rep.Lines
			batch = append(batch, *item)
		}
		if len(batch) == importBatch {
			if err := flush(); err != nil {
				return rep, memgate.AsError(op, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return rep, lineError(rep.Lines+1, memgate.Invalid("line", "line is unreadable or longer than %d bytes", maxImportLine))
	}
	for _, item := range graph.items() {
		batch = append(batch, item)
		if len(batch) == importBatch {
			if err := flush(); err != nil {
				return rep, memgate.AsError(op, err)
			}
		}
	}
	if err := flush(); err != nil {
		return rep, memgate.AsError(op, err)
	}
	return rep, nil
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
	line             int
}

// exportLine is one memory line of an export; unknown fields are refused so
// a typo does not silently drop data.
type exportLine struct {
	ID        string         `json:"id"`
	Text      *string        `json:"text"`
	Bytes     int            `json:"bytes"`
	Title     string         `json:"title"`
	Tags      []string       `json:"tags"`
	Metadata  map[string]any `json:"metadata"`
	CreatedAt *time.Time     `json:"created_at"`
	UpdatedAt *time.Time     `json:"updated_at"`
	Version   int64          `json:"version"`
}

// graphLine is one line of the reference server's memory.jsonl.
type graphLine struct {
	Type         string   `json:"type"`
	Name         string   `json:"name"`
	EntityType   string   `json:"entityType"`
	Observations []string `json:"observations"`
	From         string   `json:"from"`
	To           string   `json:"to"`
	RelationType string   `json:"relationType"`
}

func (s *Store) parseLine(line []byte, g *graph) (*importItem, bool, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(line, &probe); err != nil {
		return nil, false, memgate.Invalid("line", "line is not a JSON object")
	}
	if v, ok := probe["memgate_export"]; ok {
		var format int
		if err := json.Unmarshal(v, &format); err != nil || format < 1 || format > ExportFormat {
			return nil, false, memgate.Invalid("memgate_export", "unknown export format; upgrade memgate to import it")
		}
		return nil, true, nil
	}
	if _, ok := probe["type"]; ok {
		var gl graphLine
		if err := json.Unmarshal(line, &gl); err != nil {
			return nil, false, memgate.Invalid("line", "knowledge-graph line has fields of the wrong type")
		}
		return nil, true, g.add(gl)
	}
	var el exportLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&el); err != nil {
		return nil, false, memgate.Invalid("line", "memory line has unknown fields or fields of the wrong type")
	}
	if el.Text == nil {
		return nil, false, memgate.Invalid("text", "memory line has no text")
	}
	w := memgate.Write{ID: el.ID, Text: *el.Text, Title: el.Title, Tags: el.Tags, Metadata: el.Metadata, AllowEmpty: true}
	w, err := w.Normalize(s.opts.MaxTextBytes)
	if err != nil {
		return nil, false, err
	}
	item := &importItem{w: w}
	if el.CreatedAt != nil {
		item.created = el.CreatedAt.UnixNano()
	}
	if el.UpdatedAt != nil {
		item.updated = el.UpdatedAt.UnixNano()
	}
	return item, false, nil
}

// importBatch writes one batch in one commit.
func (s *Store) importBatch(ctx context.Context, batch []importItem, onConflict string) (imported, skipped int, err error) {
	for i := range batch {
		if batch[i].w.ID == "" {
			id, err := newID()
			if err != nil {
				return 0, 0, err
			}
			batch[i].w.ID = id
		}
		if batch[i].p, err = s.prepare(batch[i].w); err != nil {
			return 0, 0, err
		}
	}
	err = s.write.do(func(t *txn) error {
		imported, skipped = 0, 0
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
		for _, item := range batch {
			old, oldDoc, err := t.lookup(item.w.ID)
			if err != nil {
				return err
			}
			if oldDoc != 0 && onConflict == ImportSkip {
				skipped++
				continue
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
			if err := t.insert(&rec, doc, item.p.entries, item.p.length); err != nil {
				return err
			}
			imported++
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return imported, skipped, nil
}

// checkNew refuses the batch if any of its ids exists or repeats.
func (t *txn) checkNew(batch []importItem) error {
	seen := make(map[string]bool, len(batch))
	for _, item := range batch {
		_, doc, err := t.lookup(item.w.ID)
		if err != nil {
			return err
		}
		if doc != 0 || seen[item.w.ID] {
			return lineError(item.line, &memgate.Error{Code: memgate.CodeVersionConflict,
				Message: "a memory with this id already exists (on_conflict is fail)",
				Details: map[string]any{"current_version": doc}})
		}
		seen[item.w.ID] = true
	}
	return nil
}

// graph gathers the reference server's entities and relations: relations
// may come before or after the entities they join.
type graph struct {
	order    []string
	entities map[string]*graphLine
	related  map[string][]string
}

func newGraph() *graph {
	return &graph{entities: map[string]*graphLine{}, related: map[string][]string{}}
}

func (g *graph) add(l graphLine) error {
	switch l.Type {
	case "entity":
		if err := memgate.ValidateID("name", l.Name); err != nil {
			return err
		}
		if e, ok := g.entities[l.Name]; ok {
			e.Observations = append(e.Observations, l.Observations...)
			return nil
		}
		g.order = append(g.order, l.Name)
		g.entities[l.Name] = &l
	case "relation":
		if l.From == "" || l.To == "" || l.RelationType == "" {
			return memgate.Invalid("relation", "a relation needs from, to and relationType")
		}
		g.related[l.From] = append(g.related[l.From], l.RelationType+": "+l.To)
	default:
		return memgate.Invalid("type", "type must be entity or relation")
	}
	return nil
}

var notTagChar = regexp.MustCompile(`[^\p{L}\p{N}_\-.:/]+`)

func (g *graph) items() []importItem {
	out := make([]importItem, 0, len(g.order))
	for _, name := range g.order {
		e := g.entities[name]
		lines := append(append([]string{}, e.Observations...), g.related[name]...)
		text := strings.Join(lines, "\n")
		if strings.TrimSpace(text) == "" {
			text = name
		}
		w := memgate.Write{ID: name, Text: text, Metadata: map[string]any{"source": "memory.jsonl"}}
		if title := []rune(name); len(title) <= memgate.MaxTitleChars {
			w.Title = name
		}
		if tag := notTagChar.ReplaceAllString(e.EntityType, "-"); tag != "" {
			if r := []rune(tag); len(r) > memgate.MaxTagChars {
				tag = string(r[:memgate.MaxTagChars])
			}
			w.Tags = []string{tag}
			w.Metadata["entity_type"] = e.EntityType
		}
		if nw, err := w.Normalize(0); err == nil {
			out = append(out, importItem{w: nw})
		}
	}
	return out
}

// Backup writes a consistent copy of the store to w while it stays live:
// writers go on, the copy reflects one committed state.
func (s *Store) Backup(ctx context.Context, w io.Writer) (int64, error) {
	const op = "storage.Backup"
	if err := cancelled(ctx); err != nil {
		return 0, err
	}
	var n int64
	err := s.readTx(op, func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, memgate.Wrap(op, err)
}

// BackupFile writes a consistent copy of the store to path: into a temporary
// file beside it, synced, then renamed, so path is either absent or whole.
func (s *Store) BackupFile(ctx context.Context, path string) (int64, error) {
	const op = "storage.Backup"
	f, err := os.CreateTemp(filepath.Dir(path), ".memgate-backup-*")
	if err != nil {
		return 0, memgate.Internal(op, err)
	}
	defer os.Remove(f.Name())
	n, err := s.Backup(ctx, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return 0, memgate.AsError(op, err)
	}
	return n, nil
}
