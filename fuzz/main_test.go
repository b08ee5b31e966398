package fuzz_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a target leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
