package corpus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/storage"
)

// ImportStore imports mems into a new store at path, memory i under the
// id id(i): the quick way to a large store for a harness that measures
// reads (an import commits in batches, where remember commits each).
func ImportStore(path string, mems []memgate.Write, id func(i int) string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i, m := range mems {
		if err := enc.Encode(map[string]any{"id": id(i), "text": m.Text, "tags": m.Tags, "metadata": m.Metadata}); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	s, err := storage.Open(path, storage.Options{})
	if err != nil {
		return err
	}
	rep, err := s.Import(context.Background(), &buf, storage.ImportFail)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err == nil && rep.Imported != len(mems) {
		err = fmt.Errorf("imported %d of %d", rep.Imported, len(mems))
	}
	return err
}
