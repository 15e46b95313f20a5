package main

import (
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/memgate/memgate/embed"
	"github.com/memgate/memgate/storage"
)

// embedderFlags: hybrid recall (see docs/RECALL.md). serve takes them.
type embedderFlags struct {
	Embedder        string        `name:"embedder" default:"none" placeholder:"none|static:PATH|openai:URL" help:"How memories and queries become vectors for hybrid recall: none (lexical), static:PATH (a file of word vectors: GloVe text or the JSON of an npm wink-embeddings package), or openai:URL (an OpenAI-compatible /v1/embeddings endpoint; key from MEMGATE_EMBEDDER_KEY)."`
	EmbedderModel   string        `name:"embedder-model" default:"text-embedding-3-small" placeholder:"NAME" help:"The model openai: asks for."`
	EmbedderTimeout time.Duration `name:"embedder-timeout" default:"2s" placeholder:"DURATION" help:"Longest wait for the embedder in a call; past it search answers lexically."`
}

func (f *embedderFlags) validate(bad badFunc) {
	switch kind, arg, _ := strings.Cut(f.Embedder, ":"); {
	case f.Embedder == "none":
	case kind == "static" && arg != "":
	case kind == "openai" && (strings.HasPrefix(arg, "http://") || strings.HasPrefix(arg, "https://")):
	default:
		bad("embedder", "must be none, static:PATH or openai:URL (http or https)")
	}
	if f.EmbedderTimeout <= 0 {
		bad("embedder-timeout", "must be positive")
	}
	if strings.HasPrefix(f.Embedder, "openai:") && f.EmbedderModel == "" {
		bad("embedder-model", "openai: needs a model")
	}
}

// embedderKeyEnv holds the key of an openai: embedder.
const embedderKeyEnv = "MEMGATE_EMBEDDER_KEY"

// embedders holds each process's embedder: one for every store, made once
// (a static one loads its file once, in the background).
var embedders sync.Map // *app → storage.Embedder

// embedder returns the configured embedder, or nil for none.
func (a *app) embedder() storage.Embedder {
	f := a.cfg.serveFlags.Embed
	kind, arg, _ := strings.Cut(f.Embedder, ":")
	if a.cfg.taken&takesServe == 0 || (kind != "static" && kind != "openai") {
		return nil
	}
	if e, ok := embedders.Load(a); ok {
		return e.(storage.Embedder)
	}
	var e storage.Embedder
	switch kind {
	case "static":
		st := embed.NewStatic(arg, filepath.Join(a.cfg.DataDir, "cache", "vectors"))
		began := time.Now()
		go func() {
			<-st.Ready()
			if err := st.Err(); err != nil {
				a.log.Error("the word vectors could not be loaded; search stays lexical", "op", "cmd.embedder", "error", err)
				return
			}
			a.log.Info("word vectors loaded; search is hybrid", "op", "cmd.embedder", "dimensions", st.Dim(),
				"duration", time.Since(began))
		}()
		e = st
	case "openai":
		e = embed.NewOpenAI(arg, f.EmbedderModel, a.getenv(embedderKeyEnv), f.EmbedderTimeout)
	}
	actual, _ := embedders.LoadOrStore(a, e)
	return actual.(storage.Embedder)
}

// embedderOptions gives the stores the embedder, if any.
func (a *app) embedderOptions(o *storage.Options) {
	if e := a.embedder(); e != nil {
		o.Embedder, o.EmbedTimeout = e, a.cfg.serveFlags.Embed.EmbedderTimeout
	}
}

// recall is what stats says about search: "" for the server's default.
func (a *app) recall() string {
	e := a.embedder()
	if e == nil {
		return ""
	}
	name, _ := e.Model()
	return "hybrid (BM25 + " + name + ")"
}
