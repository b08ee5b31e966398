package resilience_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test of the package ends with no goroutine of its own left: the
// time limiter starts none, and a wait that a context ends returns at once.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
