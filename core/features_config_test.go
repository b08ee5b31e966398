package core_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// ftConfigErrors collects every *core.ConfigError in err's tree (errors.Join of
// one per problem).
func ftConfigErrors(err error) []*core.ConfigError {
	var out []*core.ConfigError
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if ce, ok := e.(*core.ConfigError); ok {
			out = append(out, ce)
		}
		switch x := e.(type) {
		case interface{ Unwrap() []error }:
			for _, c := range x.Unwrap() {
				walk(c)
			}
		case interface{ Unwrap() error }:
			walk(x.Unwrap())
		}
	}
	walk(err)
	return out
}

// R3 for the issue-5 fields: a bad MaxWaitInHalfOpen, RampUpDuration,
// MaxRetryAfter or RampUpStartPercent is rejected by Validate and by both
// constructors with an error matching ErrInvalidConfig whose ConfigError
// names the field; nothing is clamped, nothing panics.
func TestFeaturesConfigValidation(t *testing.T) {
	ok := core.Config{ConsecutiveFailures: 3}
	over := core.MaxOpenDurationLimit + time.Nanosecond
	bad := []struct {
		name  string
		field string
		mod   func(*core.Config)
	}{
		// -1 ns is core.WaitForever, the one negative value accepted.
		{"max wait negative", "MaxWaitInHalfOpen", func(c *core.Config) { c.MaxWaitInHalfOpen = -2 * time.Nanosecond }},
		{"max wait a negative second", "MaxWaitInHalfOpen", func(c *core.Config) { c.MaxWaitInHalfOpen = -time.Second }},
		{"max wait over limit", "MaxWaitInHalfOpen", func(c *core.Config) { c.MaxWaitInHalfOpen = over }},
		{"ramp negative", "RampUpDuration", func(c *core.Config) { c.RampUpDuration = -time.Second }},
		{"ramp over limit", "RampUpDuration", func(c *core.Config) { c.RampUpDuration = over }},
		{"retry-after negative", "MaxRetryAfter", func(c *core.Config) { c.MaxRetryAfter = -time.Millisecond }},
		{"retry-after over limit", "MaxRetryAfter", func(c *core.Config) { c.MaxRetryAfter = over }},
		{"start percent negative", "RampUpStartPercent", func(c *core.Config) { c.RampUpDuration, c.RampUpStartPercent = 10*time.Second, -1 }},
		{"start percent above 100", "RampUpStartPercent", func(c *core.Config) { c.RampUpDuration, c.RampUpStartPercent = 10*time.Second, 101 }},
		{"start percent without ramp", "RampUpStartPercent", func(c *core.Config) { c.RampUpStartPercent = 50 }},
		{"start percent 100 without ramp", "RampUpStartPercent", func(c *core.Config) { c.RampUpStartPercent = 100 }},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			check := func(err error) {
				t.Helper()
				require.ErrorIs(t, err, core.ErrInvalidConfig)
				var ce *core.ConfigError
				require.True(t, errors.As(err, &ce), "%v", err)
				require.Equal(t, tc.field, ce.Field, "%v", err)
				require.Len(t, ftConfigErrors(err), 1, "exactly one problem: %v", err)
				require.Contains(t, err.Error(), "Config."+tc.field)
			}
			_, err := c.Validate()
			check(err)
			forEachImpl(t, func(t *testing.T, mk maker) {
				var b core.CircuitBreaker
				require.NotPanics(t, func() { b, err = mk.new(c) })
				require.Nil(t, b)
				check(err)
			})
		})
	}

	t.Run("every problem named at once", func(t *testing.T) {
		c := ok
		c.MaxWaitInHalfOpen, c.RampUpDuration, c.MaxRetryAfter = -2, over, -1
		c.RampUpStartPercent = 101
		forEachImpl(t, func(t *testing.T, mk maker) {
			_, err := mk.new(c)
			require.ErrorIs(t, err, core.ErrInvalidConfig)
			var fields []string
			for _, ce := range ftConfigErrors(err) {
				fields = append(fields, ce.Field)
			}
			require.ElementsMatch(t, []string{"MaxWaitInHalfOpen", "RampUpDuration", "MaxRetryAfter", "RampUpStartPercent"}, fields, "%v", err)
		})
	})

	// The limits themselves and the documented zero values are valid.
	good := []struct {
		name string
		mod  func(*core.Config)
	}{
		{"all off", func(*core.Config) {}}, // but the max wait: its default
		{"max wait forever", func(c *core.Config) { c.MaxWaitInHalfOpen = core.WaitForever }},
		{"at the limit", func(c *core.Config) {
			c.MaxWaitInHalfOpen, c.RampUpDuration, c.MaxRetryAfter = core.MaxOpenDurationLimit, core.MaxOpenDurationLimit, core.MaxOpenDurationLimit
		}},
		{"one nanosecond", func(c *core.Config) {
			c.MaxWaitInHalfOpen, c.RampUpDuration, c.MaxRetryAfter = 1, 1, 1
		}},
		{"start 0 with ramp", func(c *core.Config) { c.RampUpDuration = time.Second }},
		{"start 100 with ramp", func(c *core.Config) { c.RampUpDuration, c.RampUpStartPercent = time.Second, 100 }},
		{"metrics", func(c *core.Config) { c.CollectMetrics = true }},
	}
	for _, tc := range good {
		t.Run("valid/"+tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			s, err := c.Validate()
			require.NoError(t, err)
			if c.MaxWaitInHalfOpen == 0 {
				// The default: the open duration (60 s here), at least 1 min.
				require.Equal(t, time.Minute, s.MaxWaitInHalfOpen)
			} else {
				require.Equal(t, c.MaxWaitInHalfOpen, s.MaxWaitInHalfOpen)
			}
			require.Equal(t, c.RampUpDuration, s.RampUpDuration)
			require.Equal(t, c.RampUpStartPercent, s.RampUpStartPercent)
			require.Equal(t, c.MaxRetryAfter, s.MaxRetryAfter)
			require.Equal(t, c.CollectMetrics, s.CollectMetrics)
			forEachImpl(t, func(t *testing.T, mk maker) {
				b, err := mk.new(c)
				require.NoError(t, err)
				require.NotNil(t, b)
			})
		})
	}
}
