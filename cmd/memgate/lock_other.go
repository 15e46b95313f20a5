//go:build !unix

package main

import "os"

// lockHTTP takes no lock where flock is missing: there a second HTTP server
// on a data folder fails its calls with store_locked.
func lockHTTP(string) (func(), error) { return func() {}, nil }

// lockedByAnother cannot tell where flock is missing; the stores folder's check
// still stands.
func lockedByAnother(*os.File) bool { return false }

// processAlive cannot tell here: every process counts as running, and no
// backup folder is swept.
func processAlive(int) bool { return true }
