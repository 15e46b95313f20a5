//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package pgtest

import "os"

// flock does nothing on a system without flock(2): there the test
// processes are not held apart while one restarts the server.
func flock(*os.File, bool) error { return nil }
