package core_test

// Regressions B01-B32 of docs/regressions.md: bugs other breakers shipped,
// and failures users reported against them, restated as tests of the rules in
// docs/semantics.md and run against both implementations. Expected values
// follow semantics.md, never another library's behaviour. The tests live in
// one file per class of fault (regression_<class>_test.go, each in the
// entries' order); this file holds the helpers they share.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// regMs sets the clock to ms milliseconds (exact, unlike float seconds).
func regMs(r *rig, ms int64) *rig {
	r.Clock.Set(time.Duration(ms) * time.Millisecond)
	return r
}

// regLasting is X(o, d): a call granted now that lasts d, then records o.
func regLasting(r *rig, o core.Outcome, d time.Duration) {
	r.t.Helper()
	p := r.A()
	r.Clock.Advance(d)
	r.D(p, o)
}

// regCancelled is X(C, d): a call granted now that lasts d and ends with
// context.Canceled.
func regCancelled(r *rig, d time.Duration) {
	r.t.Helper()
	p := r.A()
	r.Clock.Advance(d)
	r.B.Done(p, context.Canceled)
}

// regFaults collects the first few violations seen by background
// goroutines, which must not call t.FailNow.
type regFaults struct {
	n    atomic.Int64
	mu   sync.Mutex
	msgs []string
}

func (f *regFaults) add(format string, args ...any) {
	if f.n.Add(1) > 5 {
		return
	}
	f.mu.Lock()
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *regFaults) check(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Zero(t, f.n.Load(), "violations (first ones): %v", f.msgs)
}
