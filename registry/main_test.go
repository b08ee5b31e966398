package registry_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test of the package ends with no goroutine of its own left: the
// registry starts none, and the tests' own goroutines all end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
