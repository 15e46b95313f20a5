package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/term"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/server"
	"github.com/memgate/memgate/storage"
)

// The store commands work on the store of the configured namespace
// directly, without a client. All but import and backup go through the
// server's own tool handlers (server.Call), so their validation, limits and
// error codes are the tools'. A store held by a running `memgate serve`
// fails at once with store_locked: a store has one writer process.

// tool calls one tool with args (marshalled to JSON), prints its structured
// result on stdout, and turns an error result into a toolError.
func (a *app) tool(name string, args map[string]any) error {
	// json.Marshal would write invalid UTF-8 as U+FFFD: refuse it instead,
	// as the tools do.
	if err := checkUTF8(args); err != nil {
		return err
	}
	b, err := json.Marshal(args)
	if err != nil {
		return memgate.Internal("cmd."+name, err)
	}
	return a.withServer(func(srv *server.Server) error {
		res, err := call(a.ctx, srv, name, b)
		if err != nil {
			return err
		}
		if err := resultError(res); err != nil {
			return err
		}
		return a.printJSON(res.StructuredContent)
	})
}

// checkUTF8 refuses an argument holding a string that is not valid UTF-8,
// naming the argument.
func checkUTF8(args map[string]any) error {
	for name, v := range args {
		ok := true
		switch v := v.(type) {
		case string:
			ok = utf8.ValidString(v)
		case []string:
			for _, s := range v {
				ok = ok && utf8.ValidString(s)
			}
		case map[string]any:
			for k, x := range v {
				s, _ := x.(string)
				ok = ok && utf8.ValidString(k) && utf8.ValidString(s)
			}
		}
		if !ok {
			return memgate.Invalid(name, "%s must be valid UTF-8", name)
		}
	}
	return nil
}

// checkArgsUTF8 refuses a command line with an argument that is not valid
// UTF-8, saying which by its position only.
func checkArgsUTF8(args []string) error {
	for i, a := range args {
		if !utf8.ValidString(a) {
			return memgate.Invalid("arguments", "argument %d is not valid UTF-8", i+1)
		}
	}
	return nil
}

// keyValues turns repeated --flag key=value into an object of strings.
func keyValues(flag string, pairs []string) (map[string]any, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("--%s: expected key=value", flag)}
		}
		out[k] = v
	}
	return out, nil
}

// setString puts v in args under name unless it is empty: an optional flag
// left out.
func setString(args map[string]any, name, v string) {
	if v != "" {
		args[name] = v
	}
}

type rememberCmd struct {
	Store     storeFlags     `embed:""`
	Lifecycle lifecycleFlags `embed:"" group:"config"`
	Limits    limitFlags     `embed:""`
	Tools     toolsFlag      `embed:"" group:"config"`
	WriteMode writeModeFlag  `embed:"" group:"config"`
	Secrets   secretsFlag    `embed:"" group:"config"`

	Text       *string  `arg:"" optional:"" help:"The text; left out, standard input (every byte, a final newline too)."`
	ID         string   `name:"id" help:"Id of the memory; an existing one is replaced (default: a new UUIDv7)."`
	Title      string   `name:"title" help:"Short title."`
	Tag        []string `name:"tag" placeholder:"TAG" help:"Tag (repeatable, or comma-separated)."`
	Meta       []string `name:"meta" sep:"none" placeholder:"KEY=VALUE" help:"Metadata entry, a string value (repeatable)."`
	IfVersion  *int64   `name:"if-version" placeholder:"N" help:"Write only if the memory's version is N (0: only if it does not exist)."`
	AllowEmpty bool     `name:"allow-empty" help:"Accept empty or white-space-only text."`
	TTL        *int64   `name:"ttl-seconds" placeholder:"N" help:"Forget the memory N seconds after the write."`
	ExpiresAt  string   `name:"expires-at" placeholder:"TIME" help:"Forget the memory at this RFC 3339 time."`
	AllowDup   bool     `name:"allow-duplicate" help:"Store the memory even when a live memory has the same text."`
}

func (c *rememberCmd) Run(a *app) error {
	var text string
	if c.Text != nil {
		text = *c.Text
	} else {
		// One byte over the limit is enough for remember to say too_large.
		b, err := io.ReadAll(io.LimitReader(a.stdin, int64(a.cfg.MaxMemoryBytes)+1))
		if err != nil {
			return fmt.Errorf("reading the text from standard input: %w", err)
		}
		text = string(b)
	}
	args := map[string]any{"text": text}
	setString(args, "id", c.ID)
	setString(args, "title", c.Title)
	if len(c.Tag) > 0 {
		args["tags"] = c.Tag
	}
	md, err := keyValues("meta", c.Meta)
	if err != nil {
		return err
	}
	if md != nil {
		args["metadata"] = md
	}
	if c.IfVersion != nil {
		args["if_version"] = *c.IfVersion
	}
	if c.AllowEmpty {
		args["allow_empty"] = true
	}
	if c.TTL != nil {
		args["ttl_seconds"] = *c.TTL
	}
	setString(args, "expires_at", c.ExpiresAt)
	if c.AllowDup {
		args["allow_duplicate"] = true
	}
	return a.tool(server.ToolRemember, args)
}

type getCmd struct {
	Store   storeFlags  `embed:""`
	Limits  limitFlags  `embed:""`
	Tools   toolsFlag   `embed:"" group:"config"`
	Include includeFlag `embed:"" group:"config"`

	ID string `arg:"" help:"Id of the memory."`
}

func (c *getCmd) Run(a *app) error {
	return a.tool(server.ToolGet, map[string]any{"id": c.ID})
}

type searchCmd struct {
	Store   storeFlags  `embed:""`
	Limits  limitFlags  `embed:""`
	Tools   toolsFlag   `embed:"" group:"config"`
	Include includeFlag `embed:"" group:"config"`

	Query    string   `arg:"" optional:"" help:"Words to search for (optional with --tag or --filter)."`
	Tag      []string `name:"tag" placeholder:"TAG" help:"Only memories with this tag (repeatable, or comma-separated)."`
	TagsMode string   `name:"tags-mode" placeholder:"all|any" help:"Whether a memory needs all the tags (default) or any."`
	Filter   []string `name:"filter" sep:"none" placeholder:"KEY=VALUE" help:"Only memories whose metadata KEY is the string VALUE (repeatable)."`
	Limit    *int     `name:"limit" placeholder:"N" help:"Most hits, 1 to 100 (default 10)."`
	Budget   *int     `name:"budget" placeholder:"TOKENS" help:"Stop adding hits once their texts pass this many tokens."`
}

func (c *searchCmd) Run(a *app) error {
	args := map[string]any{}
	setString(args, "query", c.Query)
	if len(c.Tag) > 0 {
		args["tags"] = c.Tag
	}
	setString(args, "tags_mode", c.TagsMode)
	filter, err := keyValues("filter", c.Filter)
	if err != nil {
		return err
	}
	if filter != nil {
		args["filter"] = filter
	}
	if c.Limit != nil {
		args["limit"] = *c.Limit
	}
	if c.Budget != nil {
		args["budget"] = *c.Budget
	}
	return a.tool(server.ToolSearch, args)
}

type listCmd struct {
	Store  storeFlags `embed:""`
	Limits limitFlags `embed:""`
	Tools  toolsFlag  `embed:"" group:"config"`

	Limit  *int     `name:"limit" placeholder:"N" help:"Most memories, 1 to 1000 (default 50)."`
	Cursor string   `name:"cursor" help:"next_cursor of the previous page."`
	Order  string   `name:"order" placeholder:"ORDER" help:"updated_desc (default), created_asc or created_desc."`
	Tag    []string `name:"tag" placeholder:"TAG" help:"Only memories with every tag (repeatable, or comma-separated)."`
	Filter []string `name:"filter" sep:"none" placeholder:"KEY=VALUE" help:"Only memories whose metadata KEY is the string VALUE (repeatable)."`
}

func (c *listCmd) Run(a *app) error {
	args := map[string]any{}
	if c.Limit != nil {
		args["limit"] = *c.Limit
	}
	setString(args, "cursor", c.Cursor)
	setString(args, "order", c.Order)
	if len(c.Tag) > 0 {
		args["tags"] = c.Tag
	}
	filter, err := keyValues("filter", c.Filter)
	if err != nil {
		return err
	}
	if filter != nil {
		args["filter"] = filter
	}
	return a.tool(server.ToolList, args)
}

type forgetCmd struct {
	Store     storeFlags     `embed:""`
	Lifecycle lifecycleFlags `embed:"" group:"config"`
	Limits    limitFlags     `embed:""`
	Tools     toolsFlag      `embed:"" group:"config"`
	WriteMode writeModeFlag  `embed:"" group:"config"`

	ID        string `arg:"" help:"Id of the memory."`
	IfVersion *int64 `name:"if-version" placeholder:"N" help:"Delete only if the memory's version is N."`
}

func (c *forgetCmd) Run(a *app) error {
	args := map[string]any{"id": c.ID}
	if c.IfVersion != nil {
		args["if_version"] = *c.IfVersion
	}
	return a.tool(server.ToolForget, args)
}

// statsCmd takes the write mode, which stats reports.
type statsCmd struct {
	Store     storeFlags    `embed:""`
	Limits    limitFlags    `embed:""`
	Tools     toolsFlag     `embed:"" group:"config"`
	WriteMode writeModeFlag `embed:"" group:"config"`
}

func (c *statsCmd) Run(a *app) error {
	return a.heldStore(func() error { return a.tool(server.ToolStats, map[string]any{}) }, a.statsThrough)
}

type exportCmd struct {
	Store  storeFlags `embed:""`
	Limits limitFlags `embed:""`
	Tools  toolsFlag  `embed:"" group:"config"`

	Out string `name:"out" placeholder:"FILE" help:"Write to FILE (whole or not at all) instead of standard output."`
}

// Run pages through the export tool, concatenating its pages (only the
// first has the header line) into one JSON Lines file.
func (c *exportCmd) Run(a *app) error {
	var out *output // nil: standard output
	if c.Out != "" {
		var err error
		if out, err = openOutput(a.cfg.DataDir, c.Out); err != nil {
			return err
		}
		defer out.Close()
	}
	return a.heldStore(func() error { return c.direct(a, out) }, c.through(a, out))
}

func (c *exportCmd) direct(a *app, out *output) error {
	return a.withServer(func(srv *server.Server) error {
		if out == nil {
			_, err := exportAll(a, srv, a.stdout)
			return err
		}
		var n int
		err := out.writeTo(func(w io.Writer) (err error) {
			n, err = exportAll(a, srv, w)
			return err
		})
		if err != nil {
			return err
		}
		return a.printJSON(map[string]any{"count": n})
	})
}

func exportAll(a *app, srv *server.Server, w io.Writer) (int, error) {
	total, cursor := 0, ""
	for {
		args := map[string]any{"limit": server.MaxExportLimit}
		setString(args, "cursor", cursor)
		b, _ := json.Marshal(args)
		res, err := call(a.ctx, srv, server.ToolExport, b)
		if err != nil {
			return total, err
		}
		if err := resultError(res); err != nil {
			return total, err
		}
		var page struct {
			Count      int    `json:"count"`
			NextCursor string `json:"next_cursor"`
		}
		sc, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(sc, &page); err != nil || len(res.Content) == 0 {
			return total, memgate.Internal("cmd.export", errors.New("export result without its page"))
		}
		lines, ok := res.Content[0].(*mcp.TextContent)
		if !ok {
			return total, memgate.Internal("cmd.export", errors.New("export page is not text"))
		}
		if _, err := io.WriteString(w, lines.Text); err != nil {
			return total, err
		}
		total += page.Count
		if page.NextCursor == "" {
			return total, nil
		}
		cursor = page.NextCursor
	}
}

type importCmd struct {
	Store     storeFlags     `embed:""`
	Lifecycle lifecycleFlags `embed:"" group:"config"`
	Memory    memoryFlag     `embed:"" group:"config"`

	File       string `arg:"" optional:"" placeholder:"FILE|-" help:"JSON Lines file, or - for standard input (the default when standard input is not a terminal)."`
	OnConflict string `name:"on-conflict" placeholder:"skip|overwrite|fail" help:"What to do with a memory whose id exists."`
}

// Run imports straight into the store (storage.Import), in batches of a
// thousand memories per commit. Unlike remember, it does not look for
// credentials: it reads files the operator chose. Without a file it reads
// standard input, unless that is a terminal. A failed import says how many
// memories it had committed before the line that stopped it: those stay.
func (c *importCmd) Run(a *app) error {
	switch c.OnConflict {
	case storage.ImportSkip, storage.ImportOverwrite, storage.ImportFail:
	default:
		return usageError{errors.New("--on-conflict: must be skip, overwrite or fail")}
	}
	var r io.Reader = a.stdin
	switch c.File {
	case "-":
	case "":
		if isTerminal(a.stdin) {
			return usageError{errors.New("import: give a FILE, or - to read standard input")}
		}
	default:
		f, err := os.Open(c.File)
		if err != nil {
			return err
		}
		defer f.Close()
		if st, err := f.Stat(); err != nil {
			return err
		} else if st.IsDir() {
			return errors.New("import: FILE is a folder, not a file")
		}
		r = f
	}
	return a.heldStore(func() error { return c.direct(a, r) }, c.through(a, r))
}

func (c *importCmd) direct(a *app, r io.Reader) error {
	return a.withStore(func(st *storage.Store, ns memgate.Namespace) error {
		rep, err := st.Import(a.ctx, r, c.OnConflict)
		if err != nil {
			return importError(err, rep)
		}
		return a.printJSON(struct {
			Namespace memgate.Namespace `json:"namespace"`
			storage.ImportReport
		}{ns, rep})
	})
}

// importError adds to the error of a failed import how many memories it
// committed before it.
func importError(err error, rep storage.ImportReport) error {
	e := memgate.AsError("cmd.import", err)
	if e.Code == memgate.CodeInternal || e.Code == "" {
		return err
	}
	details := map[string]any{"imported": rep.Imported}
	for k, v := range e.Details {
		details[k] = v
	}
	return &memgate.Error{Code: e.Code, Details: details, Cause: e.Cause,
		Message: fmt.Sprintf("%s (%d memories were imported before it, and stay)", e.Message, rep.Imported)}
}

// isTerminal reports whether r is a terminal, which holds no file of
// memories (/dev/null, a character device too, is an empty file).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

type backupCmd struct {
	Store storeFlags `embed:""`

	File string `arg:"" placeholder:"FILE" help:"Where to write the copy (replaced whole, or left as it was)."`
}

// Run copies the live store's file: one read transaction, so writers of
// other processes are not involved (there are none: the lease holds the
// store's lock) and the copy is one committed state.
func (c *backupCmd) Run(a *app) error {
	out, err := openOutput(a.cfg.DataDir, c.File)
	if err != nil {
		return err
	}
	defer out.Close()
	return a.heldStore(func() error { return c.direct(a, out) }, c.through(a, out))
}

func (c *backupCmd) direct(a *app, out *output) error {
	return a.withStore(func(st *storage.Store, ns memgate.Namespace) error {
		var n int64
		err := out.write(func(f *os.File) (err error) {
			n, err = st.BackupInto(a.ctx, f)
			return err
		})
		if err != nil {
			return err
		}
		return a.printJSON(map[string]any{"namespace": ns, "bytes": n})
	})
}

// candidatesCmd works on the candidates that remember keeps in
// --write-mode candidate: memories that get and search do not see until a
// person approves them. A candidate is named by the id of the memory it
// would write.
type candidatesCmd struct {
	List    candidatesListCmd    `cmd:"" help:"List the candidates waiting for approval."`
	Approve candidatesApproveCmd `cmd:"" help:"Write a candidate as a memory (its if_version checked, as any write)."`
	Reject  candidatesRejectCmd  `cmd:"" help:"Drop a candidate."`
}

type candidatesListCmd struct {
	Store storeFlags `embed:""`

	Limit  *int   `name:"limit" placeholder:"N" help:"Most candidates, 1 to 1000 (default 50)."`
	Cursor string `name:"cursor" help:"next_cursor of the previous page."`
}

// pageLimit is a page's --limit: 0 (the default) when left out; a limit
// given must be one, as storage reads 0 as the default.
func pageLimit(limit *int) (int, error) {
	if limit == nil {
		return 0, nil
	}
	if *limit < 1 {
		return 0, usageError{fmt.Errorf("--limit: must be from 1 to %d", memgate.MaxListLimit)}
	}
	return *limit, nil
}

func (c *candidatesListCmd) Run(a *app) error {
	limit, err := pageLimit(c.Limit)
	if err != nil {
		return err
	}
	return a.heldStore(func() error { return c.direct(a, limit) }, c.through(a, limit))
}

func (c *candidatesListCmd) direct(a *app, limit int) error {
	return a.withStore(func(st *storage.Store, _ memgate.Namespace) error {
		page, err := st.Candidates(a.ctx, c.Cursor, limit)
		if err != nil {
			return err
		}
		if page.Memories == nil {
			page.Memories = []memgate.Memory{}
		}
		return a.printJSON(page)
	})
}

type candidatesApproveCmd struct {
	Store storeFlags `embed:""`

	ID string `arg:"" help:"Id of the candidate."`
}

func (c *candidatesApproveCmd) Run(a *app) error {
	return a.heldStore(func() error { return c.direct(a) }, a.postThrough("/candidates/", c.ID, "/approve"))
}

func (c *candidatesApproveCmd) direct(a *app) error {
	return a.withStore(func(st *storage.Store, _ memgate.Namespace) error {
		m, err := st.Approve(a.ctx, c.ID)
		if err != nil {
			return err
		}
		return a.printJSON(map[string]any{"memory": m})
	})
}

type candidatesRejectCmd struct {
	Store storeFlags `embed:""`

	ID string `arg:"" help:"Id of the candidate."`
}

func (c *candidatesRejectCmd) Run(a *app) error {
	return a.heldStore(func() error { return c.direct(a) }, a.postThrough("/candidates/", c.ID, "/reject"))
}

func (c *candidatesRejectCmd) direct(a *app) error {
	return a.withStore(func(st *storage.Store, _ memgate.Namespace) error {
		if err := st.Reject(a.ctx, c.ID); err != nil {
			return err
		}
		return a.printJSON(map[string]any{"id": c.ID, "rejected": true})
	})
}

type invokeCmd struct {
	Store  storeFlags  `embed:""`
	Server serverFlags `embed:""`

	Tool string `arg:"" help:"Tool to call: remember, get, search, list, forget, stats or export."`
}

// maxInvokeInput bounds the arguments read from standard input: as much as
// one stdio message may hold.
const maxInvokeInput = mcp.DefaultMaxLineLength

// Run calls the tool with the JSON object on standard input (nothing means
// no arguments) and prints its structured content, the error envelope
// included; an error result exits with status 1.
func (c *invokeCmd) Run(a *app) error {
	in, err := io.ReadAll(io.LimitReader(a.stdin, maxInvokeInput+1))
	if err != nil {
		return fmt.Errorf("reading the arguments from standard input: %w", err)
	}
	if len(in) > maxInvokeInput {
		return usageError{fmt.Errorf("the arguments on standard input pass %d bytes", maxInvokeInput)}
	}
	in = bytes.TrimSpace(in)
	if len(in) == 0 {
		in = []byte("{}")
	}
	if !json.Valid(in) {
		return usageError{errors.New("standard input is not JSON; invoke takes the tool's arguments as one JSON object")}
	}
	return a.withServer(func(srv *server.Server) error {
		res, err := call(a.ctx, srv, c.Tool, in)
		if err != nil {
			return err
		}
		if err := a.printJSON(res.StructuredContent); err != nil {
			return err
		}
		return resultError(res)
	})
}
