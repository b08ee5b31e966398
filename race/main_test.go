package race_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// hammer, worker pool and subprocess watcher here must end with its test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
