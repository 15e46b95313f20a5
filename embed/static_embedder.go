package embed

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/memgate/memgate/search"
)

// Static embeds text as the SIF-weighted mean of its words' vectors (see
// search.Vectors.Embed), from a file of word vectors that it loads in the
// background. Until the file is loaded Embed answers search.ErrNotReady;
// if it cannot be loaded, search.ErrUnavailable. It is safe for concurrent
// use.
type Static struct {
	name    string
	ready   chan struct{}
	vectors atomic.Pointer[search.Vectors]
	version atomic.Pointer[string]
	mu      sync.Mutex
	err     error
}

// NewStatic starts loading the word vectors of path (see LoadFile, with
// its cache in cacheDir) and returns at once. The model is named after the
// file, its version is the start of the file's SHA-256.
func NewStatic(path, cacheDir string) *Static {
	s := &Static{name: modelName(path), ready: make(chan struct{})}
	go func() {
		defer close(s.ready)
		v, sum, err := LoadFile(path, cacheDir)
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
		version := "sha256:" + sum[:12]
		s.version.Store(&version)
		s.vectors.Store(v)
	}()
	return s
}

// StaticFrom returns a Static over vectors already loaded, ready at once.
func StaticFrom(name, version string, v *search.Vectors) *Static {
	s := &Static{name: name, ready: make(chan struct{})}
	v.Seal()
	s.version.Store(&version)
	s.vectors.Store(v)
	close(s.ready)
	return s
}

func modelName(path string) string {
	base := filepath.Base(path)
	for _, ext := range []string{".json", ".txt", ".vec"} {
		base = strings.TrimSuffix(base, ext)
	}
	return base
}

// Ready is closed once loading has ended, well or not.
func (s *Static) Ready() <-chan struct{} { return s.ready }

// Err is why loading failed, once it has.
func (s *Static) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Model is the model's name and version ("" until loaded).
func (s *Static) Model() (string, string) {
	if v := s.version.Load(); v != nil {
		return s.name, *v
	}
	return s.name, ""
}

// Dim is the number of dimensions (0 until loaded).
func (s *Static) Dim() int {
	if v := s.vectors.Load(); v != nil {
		return v.Dim()
	}
	return 0
}

// Embed returns a unit vector per text; a text none of whose words has a
// vector gets nil.
func (s *Static) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	v := s.vectors.Load()
	if v == nil {
		if s.Err() != nil {
			return nil, search.ErrUnavailable
		}
		return nil, search.ErrNotReady
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		vec := make([]float32, v.Dim())
		if v.Embed(vec, t) > 0 {
			out[i] = vec
		}
	}
	return out, nil
}
