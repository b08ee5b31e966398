package core_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// R3: every bad field is rejected with an error that names it and matches
// ErrInvalidConfig; nothing is clamped; neither constructor panics.
func TestConfigRejectsEachBadField(t *testing.T) {
	ok := core.Config{FailureRateThreshold: 50}
	for _, tc := range []struct {
		field string
		mod   func(*core.Config)
	}{
		{"MinimumNumberOfCalls", func(c *core.Config) { c.MinimumNumberOfCalls = -1 }},
		{"MinimumNumberOfCalls", func(c *core.Config) { c.WindowSize, c.MinimumNumberOfCalls = 5, 10 }},
		{"FailureRateThreshold", func(c *core.Config) { c.FailureRateThreshold = 101 }},
		{"FailureRateThreshold", func(c *core.Config) { c.FailureRateThreshold = -1 }},
		{"SlowCallRateThreshold", func(c *core.Config) { c.SlowCallRateThreshold = 101 }},
		{"SlowCallRateThreshold", func(c *core.Config) { c.SlowCallRateThreshold = 50 }},
		{"SlowCallDurationThreshold", func(c *core.Config) { c.SlowCallDurationThreshold = -time.Second }},
		{"PermittedCallsInHalfOpen", func(c *core.Config) { c.PermittedCallsInHalfOpen = -1 }},
		{"PermittedCallsInHalfOpen", func(c *core.Config) { c.PermittedCallsInHalfOpen = 256 }},
		{"SuccessesToClose", func(c *core.Config) { c.SuccessesToClose = -1 }},
		{"SuccessesToClose", func(c *core.Config) { c.SuccessesToClose = 256 }},
		{"OpenDuration", func(c *core.Config) { c.OpenDuration = -time.Second }},
		{"OpenDuration", func(c *core.Config) { c.OpenDuration = 400 * 24 * time.Hour }},
		{"FailureRateThreshold", func(c *core.Config) { c.FailureRateThreshold = 0 }}, // no trip rule at all
		{"WindowSize", func(c *core.Config) { c.WindowSize = -1 }},
		{"WindowSize", func(c *core.Config) { c.WindowSize = core.MaxCountWindow + 1 }},
		{"WindowSize", func(c *core.Config) { c.WindowType, c.WindowSize = core.TimeBased, core.MaxTimeWindow+1 }},
		{"WindowType", func(c *core.Config) { c.WindowType = 7 }},
		{"HalfOpenFullWait", func(c *core.Config) { c.HalfOpenFullWait = -time.Millisecond }},
		{"HalfOpenFullWait", func(c *core.Config) { c.HalfOpenFullWait = 400 * 24 * time.Hour }},
		{"FailureCountThreshold", func(c *core.Config) { c.FailureCountThreshold = -1 }},
		{"FailureCountThreshold", func(c *core.Config) { c.WindowSize, c.FailureCountThreshold = 5, 6 }},
		{"ConsecutiveFailures", func(c *core.Config) { c.ConsecutiveFailures = -1 }},
		{"OpenDurationBackoff", func(c *core.Config) { c.OpenDurationBackoff = 0.5 }},
		{"OpenDurationBackoff", func(c *core.Config) { c.OpenDurationBackoff = math.NaN() }},
		{"OpenDurationBackoff", func(c *core.Config) { c.OpenDurationBackoff = math.Inf(1) }},
		{"OpenDurationBackoff", func(c *core.Config) { c.OpenDurationBackoff, c.MaxOpenDuration = 1.01, time.Hour }},
		{"MaxOpenDuration", func(c *core.Config) { c.OpenDurationBackoff = 2 }},
		{"MaxOpenDuration", func(c *core.Config) { c.OpenDuration, c.MaxOpenDuration = time.Minute, time.Second }},
		{"MaxOpenDuration", func(c *core.Config) { c.MaxOpenDuration = -1 }},
	} {
		c := ok
		tc.mod(&c)
		_, err := c.Validate()
		require.ErrorIs(t, err, core.ErrInvalidConfig, tc.field)
		var ce *core.ConfigError
		require.True(t, errors.As(err, &ce), tc.field)
		require.Equal(t, tc.field, ce.Field, "%v", err)
		require.Contains(t, err.Error(), "Config."+tc.field)
		for _, im := range impls {
			b, err := im.New(c)
			require.Nil(t, b)
			require.ErrorIs(t, err, core.ErrInvalidConfig, "%s %s", im.Name, tc.field)
		}
	}
}

// One error per problem, all at once.
func TestConfigReportsEveryProblem(t *testing.T) {
	_, err := core.Config{FailureRateThreshold: 200, SuccessesToClose: -2, OpenDuration: -1}.Validate()
	msg := err.Error()
	for _, f := range []string{"FailureRateThreshold", "SuccessesToClose", "OpenDuration"} {
		require.Contains(t, msg, f)
	}
	require.Len(t, strings.Split(msg, "\n"), 3)
}

// The documented zero values.
func TestConfigDefaults(t *testing.T) {
	s, err := core.Config{FailureRateThreshold: 50}.Validate()
	require.NoError(t, err)
	require.Equal(t, 100, s.WindowSize)
	require.Equal(t, 100, s.MinimumNumberOfCalls)
	require.False(t, s.MinimumAppliesToCount)
	require.Equal(t, 1, s.PermittedCallsInHalfOpen)
	require.Equal(t, 1, s.SuccessesToClose)
	require.Equal(t, 60*time.Second, s.OpenDuration)
	require.Equal(t, 1.0, s.OpenDurationBackoff) // no backoff
	require.Equal(t, 60*time.Second, s.MaxOpenDuration)
	require.Equal(t, 6*time.Second, s.HalfOpenFullWait) // a tenth of the open duration
	require.NotNil(t, s.Clock)
	require.NotNil(t, s.Classifier)

	s, err = core.Config{WindowSize: 20, FailureRateThreshold: 50, PermittedCallsInHalfOpen: 4}.Validate()
	require.NoError(t, err)
	require.Equal(t, 20, s.MinimumNumberOfCalls) // a count window is judged only when full
	require.Equal(t, 4, s.SuccessesToClose)

	// The half-open-full wait is rounded up to whole milliseconds, and at
	// least one.
	s, err = core.Config{ConsecutiveFailures: 1, OpenDuration: 5 * time.Millisecond}.Validate()
	require.NoError(t, err)
	require.Equal(t, time.Millisecond, s.HalfOpenFullWait)
	s, err = core.Config{ConsecutiveFailures: 1, OpenDuration: 1234567 * time.Microsecond}.Validate()
	require.NoError(t, err)
	require.Equal(t, 124*time.Millisecond, s.HalfOpenFullWait)

	s, err = core.Config{ConsecutiveFailures: 5}.Validate()
	require.NoError(t, err)
	require.Zero(t, s.WindowSize) // no rule needs a window

	s, err = core.Config{ConsecutiveFailures: 1, OpenDuration: 5 * time.Second, OpenDurationBackoff: 2, MaxOpenDuration: time.Minute}.Validate()
	require.NoError(t, err)
	// The steps themselves: internal/rulecases.Backoffs, on both sides.
	require.Equal(t, []any{5 * time.Second, 2.0, time.Minute}, []any{s.OpenDuration, s.OpenDurationBackoff, s.MaxOpenDuration})
}

// The edge values R3 allows are accepted.
func TestConfigAcceptsLimits(t *testing.T) {
	for _, c := range []core.Config{
		{WindowSize: 1, FailureRateThreshold: 100, MinimumNumberOfCalls: 1},
		{WindowSize: core.MaxCountWindow, FailureRateThreshold: 1, MinimumNumberOfCalls: core.MaxCountWindow},
		{WindowType: core.TimeBased, WindowSize: core.MaxTimeWindow, FailureCountThreshold: 1_000_000},
		{ConsecutiveFailures: 1, PermittedCallsInHalfOpen: 255, SuccessesToClose: 255, OpenDuration: time.Nanosecond},
		{ConsecutiveFailures: 1, OpenDuration: core.MaxOpenDurationLimit},
	} {
		for _, im := range impls {
			_, err := im.New(c)
			require.NoError(t, err, "%s %+v", im.Name, c)
		}
	}
}
