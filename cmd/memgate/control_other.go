//go:build !linux && !darwin

package main

import (
	"errors"
	"net"
)

// peerUID is known on Linux and macOS only: elsewhere the control socket refuses
// every peer, and a store held by a running server stays store_locked.
func peerUID(*net.UnixConn) (int, error) {
	return 0, errors.New("the control socket checks its peer on Linux only")
}
