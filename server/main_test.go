package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No test may leave a goroutine behind: every gateway, session and stdio
// runner a test starts must have stopped when it ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
