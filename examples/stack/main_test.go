package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRun plays the whole demo (simulated time: milliseconds of real time)
// and checks its claims, which run itself checks too, and that two runs
// print the same report.
func TestRun(t *testing.T) {
	var a, b bytes.Buffer
	require.NoError(t, run(&a))
	require.NoError(t, run(&b))
	require.Equal(t, a.String(), b.String(), "the demo is not deterministic")
	out := a.String()
	for _, want := range []string{"closed    -> open", "half-open -> closed", "0 attempts followed one", "stopped by the budget"} {
		require.True(t, strings.Contains(out, want), "the report lacks %q:\n%s", want, out)
	}
}

func TestPhaseAt(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want phase
	}{
		{0, healthy},
		{brownoutStart - 1, healthy},
		{brownoutStart, brownout},
		{outageStart - 1, brownout},
		{outageStart, outage},
		{recoveryStart - 1, outage},
		{recoveryStart, recovered},
		{runFor + time.Hour, recovered},
	}
	for _, c := range cases {
		require.Equal(t, c.want, phaseAt(c.d), "phaseAt(%v)", c.d)
	}
}
