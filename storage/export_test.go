package storage

// SetMaxImportEntry sets the bound of an import into a replica, and
// returns what puts it back.
func SetMaxImportEntry(n int64) func() {
	old := maxImportEntry
	maxImportEntry = n
	return func() { maxImportEntry = old }
}
