//go:build !unix

package embed

import "os"

func mapFile(path string) ([]byte, error) { return os.ReadFile(path) }
