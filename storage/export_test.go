package storage

// SetMaxImportEntry sets the bound of an import into a replica, and
// returns what puts it back.
func SetMaxImportEntry(n int64) func() {
	old := maxImportEntry
	maxImportEntry = n
	return func() { maxImportEntry = old }
}

// SetCompactBytes sets how many bytes of entries a replica logs before it
// sends a snapshot, and returns what puts it back.
func SetCompactBytes(n int64) func() {
	old := compactBytes
	compactBytes = n
	return func() { compactBytes = old }
}

// SetMaxSnapshotBytes sets the largest snapshot a replica sends, and
// returns what puts it back.
func SetMaxSnapshotBytes(n int64) func() {
	old := maxSnapshotBytes
	maxSnapshotBytes = n
	return func() { maxSnapshotBytes = old }
}

// SetClusterMin sets how many vectors a store holds before it clusters
// them, and returns what puts it back.
func SetClusterMin(n int) func() {
	old := clusterMin
	clusterMin = n
	return func() { clusterMin = old }
}
