package suite

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/bench/corpus"
	"github.com/memgate/memgate/bench/driver"
)

// system is one MCP memory server driven over stdio: how to start it on a
// fresh folder, how to write memory i, how to ask a query, and how to read
// the ranked hits.
type system struct {
	name       string
	durability string // written next to every write figure
	// start starts the server with its data under dir.
	start func(dir string) (*driver.Stdio, error)
	// write returns the tool and arguments that store memory i.
	write func(i int, m memgate.Write) (string, any)
	// id returns the identity of memory i as the search results name it.
	id func(i int, res json.RawMessage) string
	// search returns the tool and arguments of a query, and whether the
	// system honours its class (tag filters) or only approximates it.
	search func(q query, limit int) (string, any)
	hits   func(res json.RawMessage) []string
	// files lists the files that hold the data, for disk use.
	files func(dir string) []string
}

// query is one search of the recall scenarios.
type query struct {
	corpus.Query
	class string
}

// Query classes.
const (
	classQ3    = "q3"
	classQ1    = "q1"
	classTags  = "q3+tags"
	classNoHit = "no-hit"
)

var classes = []string{classQ3, classQ1, classTags, classNoHit}

func memgateSystem(c *config) *system {
	return &system{
		name:       "memgate",
		durability: "fsync per group commit (two fdatasyncs per bbolt commit)",
		start: func(dir string) (*driver.Stdio, error) {
			argv := []string{c.memgateBin, "serve", "--data-dir", dir, "--noop"}
			if c.profile != "" && c.profileNext {
				// Profiled between SIGUSR1 and SIGUSR2 (see s3).
				argv = append(argv, "--cpuprofile", c.profile+".recall", "--profile-signal")
				c.profileNext = false
			}
			s, err := driver.StartStdio("memgate", argv, nil, "")
			if err != nil {
				return nil, err
			}
			return s, s.Initialize()
		},
		write: func(i int, m memgate.Write) (string, any) { return "remember", rememberArgs(m) },
		id: func(i int, res json.RawMessage) string {
			var r struct {
				Memory struct {
					ID string `json:"id"`
				} `json:"memory"`
			}
			json.Unmarshal(res, &r)
			return r.Memory.ID
		},
		search: func(q query, limit int) (string, any) {
			a := map[string]any{"query": q.Text, "limit": limit}
			if q.class == classTags {
				a["tags"] = q.Tags
			}
			return "search", a
		},
		hits: func(res json.RawMessage) []string {
			var r struct {
				Hits []struct {
					ID string `json:"id"`
				} `json:"hits"`
			}
			json.Unmarshal(res, &r)
			ids := make([]string, len(r.Hits))
			for i, h := range r.Hits {
				ids[i] = h.ID
			}
			return ids
		},
		files: func(dir string) []string { return []string{dir} },
	}
}

// rememberArgs are memgate's remember arguments for m. Every write is
// stored, duplicate texts of the corpus too (allow_duplicate), so that the
// scenarios measure and count writes as they always did.
func rememberArgs(m memgate.Write) map[string]any {
	a := map[string]any{"text": m.Text, "allow_duplicate": true}
	if len(m.Tags) > 0 {
		a["tags"] = m.Tags
	}
	if len(m.Metadata) > 0 {
		a["metadata"] = m.Metadata
	}
	return a
}

func entityName(i int) string { return fmt.Sprintf("memory-%06d", i) }

// graphWrite is a create_entities call with one entity per memory, the
// shape both knowledge-graph peers take.
func graphWrite(i int, m memgate.Write) (string, any) {
	typ := "memory"
	if len(m.Tags) > 0 {
		typ = m.Tags[0]
	}
	return "create_entities", map[string]any{"entities": []map[string]any{{
		"name": entityName(i), "entityType": typ, "observations": []string{m.Text},
	}}}
}

func graphHits(res json.RawMessage) []string {
	var r struct {
		Entities []struct {
			Name string `json:"name"`
		} `json:"entities"`
	}
	json.Unmarshal(res, &r)
	ids := make([]string, len(r.Entities))
	for i, e := range r.Entities {
		ids[i] = e.Name
	}
	return ids
}

func officialSystem(c *config) *system {
	entry := filepath.Join(c.peers, "node_modules/@modelcontextprotocol/server-memory/dist/index.js")
	return &system{
		name:       "server-memory",
		durability: "no fsync; the whole file rewritten and renamed per call",
		start: func(dir string) (*driver.Stdio, error) {
			s, err := driver.StartStdio("server-memory", []string{c.node, entry},
				[]string{"MEMORY_FILE_PATH=" + filepath.Join(dir, "memory.jsonl")}, dir)
			if err != nil {
				return nil, err
			}
			return s, s.Initialize()
		},
		write: graphWrite,
		id:    func(i int, _ json.RawMessage) string { return entityName(i) },
		search: func(q query, limit int) (string, any) {
			return "search_nodes", map[string]any{"query": q.Text}
		},
		hits:  graphHits,
		files: func(dir string) []string { return []string{filepath.Join(dir, "memory.jsonl")} },
	}
}

func libsqlSystem(c *config) *system {
	entry := filepath.Join(c.peers, "libsql/node_modules/mcp-memory-libsql/dist/index.js")
	return &system{
		name:       "mcp-memory-libsql",
		durability: "fsync per transaction (SQLite rollback journal)",
		start: func(dir string) (*driver.Stdio, error) {
			s, err := driver.StartStdio("libsql", []string{c.node, entry},
				[]string{"LIBSQL_URL=file:" + filepath.Join(dir, "libsql.db")}, dir)
			if err != nil {
				return nil, err
			}
			return s, s.Initialize()
		},
		write: graphWrite,
		id:    func(i int, _ json.RawMessage) string { return entityName(i) },
		search: func(q query, limit int) (string, any) {
			return "search_nodes", map[string]any{"query": q.Text, "limit": min(limit, 50)}
		},
		hits:  graphHits,
		files: func(dir string) []string { return []string{dir} },
	}
}

func aidevkitSystem(c *config) *system {
	entry := filepath.Join(c.peers, "aidevkit/node_modules/@ai-devkit/memory/dist/index.js")
	return &system{
		name:       "@ai-devkit/memory",
		durability: "no fsync per commit (SQLite WAL, synchronous=NORMAL): survives a crash, not a power loss",
		start: func(dir string) (*driver.Stdio, error) {
			s, err := driver.StartStdio("ai-devkit", []string{c.node, entry}, []string{"HOME=" + dir}, dir)
			if err != nil {
				return nil, err
			}
			return s, s.Initialize()
		},
		write: func(i int, m memgate.Write) (string, any) {
			// A unique title of 10-100 characters; the text is the content.
			title := fmt.Sprintf("memory %06d %s", i, m.Text)
			if len(title) > 90 {
				title = strings.ToValidUTF8(title[:90], "")
			}
			a := map[string]any{"title": title, "content": m.Text}
			if len(m.Tags) > 0 {
				a["tags"] = m.Tags
			}
			return "memory_storeKnowledge", a
		},
		id: func(i int, res json.RawMessage) string {
			var r struct {
				ID string `json:"id"`
			}
			json.Unmarshal(res, &r)
			return r.ID
		},
		search: func(q query, limit int) (string, any) {
			a := map[string]any{"query": q.Text, "limit": min(limit, 20)}
			if q.class == classTags {
				a["contextTags"] = q.Tags
			}
			return "memory_searchKnowledge", a
		},
		hits: func(res json.RawMessage) []string {
			var r struct {
				Results []struct {
					ID string `json:"id"`
				} `json:"results"`
			}
			json.Unmarshal(res, &r)
			ids := make([]string, len(r.Results))
			for i, h := range r.Results {
				ids[i] = h.ID
			}
			return ids
		},
		files: func(dir string) []string { return []string{filepath.Join(dir, ".ai-devkit")} },
	}
}

// installed reports whether a peer's entry point is there.
func installed(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// diskBytes sums the sizes of the regular files under paths.
func diskBytes(paths []string) int64 {
	var n int64
	for _, p := range paths {
		filepath.Walk(p, func(_ string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				n += fi.Size()
			}
			return nil
		})
	}
	return n
}

// callTool runs one tool call on s and returns the result body.
func callTool(s *driver.Stdio, tool string, args any) (json.RawMessage, time.Duration, error) {
	return s.CallTool(tool, args)
}
