package core_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
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
		{"WindowSize", func(c *core.Config) {
			c.WindowType, c.WindowSize, c.BucketWidth = core.TimeBased, core.MaxTimeBuckets/10+1, core.MinBucketWidth
		}},
		{"WindowSize", func(c *core.Config) {
			c.WindowType, c.WindowSize, c.BucketWidth = core.TimeBased, core.MaxTimeBuckets/4+1, 250*time.Millisecond
		}},
		{"BucketWidth", func(c *core.Config) { c.BucketWidth = time.Second }}, // a count window
		{"BucketWidth", func(c *core.Config) { c.WindowType, c.BucketWidth = core.TimeBased, 150*time.Millisecond }},
		{"BucketWidth", func(c *core.Config) { c.WindowType, c.BucketWidth = core.TimeBased, 99*time.Millisecond }},
		{"BucketWidth", func(c *core.Config) { c.WindowType, c.BucketWidth = core.TimeBased, 2*time.Second }},
		{"BucketWidth", func(c *core.Config) { c.WindowType, c.BucketWidth = core.TimeBased, -time.Second }},
		{"BucketWidth", func(c *core.Config) { c.WindowType, c.BucketWidth = core.TimeBased, 100*time.Millisecond+1 }},
		{"BucketWidth", func(c *core.Config) {
			c.WindowType, c.BucketWidth, c.FailureRateThreshold, c.ConsecutiveFailures = core.TimeBased, core.MinBucketWidth, 0, 3
		}}, // no window
		{"InitialState", func(c *core.Config) { c.InitialState = core.NumStates }},
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
		{"OpenDurationBackoff", func(c *core.Config) {
			c.OpenDurationFunc, c.OpenDurationBackoff, c.MaxOpenDuration = openFor(time.Second), 2, time.Hour
		}},
		{"MaxOpenDuration", func(c *core.Config) { c.OpenDurationFunc = openFor(time.Second) }},
		{"MaxOpenDuration", func(c *core.Config) {
			c.OpenDurationFunc, c.OpenDuration, c.MaxOpenDuration = openFor(time.Second), time.Minute, time.Second
		}},
		{"MaxOpenDuration", func(c *core.Config) {
			c.OpenDurationFunc, c.MaxOpenDuration = openFor(time.Second), core.MaxOpenDurationLimit+1
		}},
		{"OpenDurationJitter", func(c *core.Config) { c.OpenDurationJitter = -0.01 }},
		{"OpenDurationJitter", func(c *core.Config) { c.OpenDurationJitter = 1.01 }},
		{"OpenDurationJitter", func(c *core.Config) { c.OpenDurationJitter = math.NaN() }},
		{"OpenDurationJitter", func(c *core.Config) { c.OpenDurationJitter = math.Inf(1) }},
		{"Name", func(c *core.Config) { c.Name = "\xff.example" }},
		{"Name", func(c *core.Config) { c.Name = "api-\xed\xa0\x80" }}, // a UTF-16 surrogate
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

// A name that is not valid UTF-8 (one that cannot be a metric label value)
// is rejected with an error that quotes it; every valid UTF-8 name is
// accepted, control characters included.
func TestConfigRejectsNameThatIsNotUTF8(t *testing.T) {
	_, err := core.Config{Name: "\xff.example", ConsecutiveFailures: 1}.Validate()
	require.ErrorIs(t, err, core.ErrInvalidConfig)
	require.EqualError(t, err, `core: Config.Name: "\xff.example" is not valid UTF-8`)
	for _, name := range []string{"", "payments", "api.example:443", "zürich-db", "日本", "tab\there", "\x00"} {
		_, err := core.Config{Name: name, ConsecutiveFailures: 1}.Validate()
		require.NoError(t, err, "%q", name)
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

// The problems come out in one fixed order, the order in which Validate
// resolves the fields (rules, window, bucket width, minimum number of calls, half-open
// probes, open durations, half-open waits, ramp-up and hints), so that the
// same config always reads the same.
func TestConfigReportsProblemsInOrder(t *testing.T) {
	_, err := core.Config{
		Name:       "\xc3",
		WindowType: 7, FailureRateThreshold: 101, SlowCallRateThreshold: 101, SlowCallDurationThreshold: -1,
		FailureCountThreshold: -1, ConsecutiveFailures: -1, WindowSize: -1, BucketWidth: -1, MinimumNumberOfCalls: -1,
		PermittedCallsInHalfOpen: -1, SuccessesToClose: -1, OpenDuration: -1, MaxWaitInHalfOpen: -2,
		HalfOpenFullWait: -1, RampUpDuration: -1, MaxRetryAfter: -1, RampUpStartPercent: -1, InitialState: core.NumStates,
	}.Validate()
	joined, ok := err.(interface{ Unwrap() []error })
	require.True(t, ok, "%v", err)
	var fields []string
	for _, e := range joined.Unwrap() {
		var ce *core.ConfigError
		require.True(t, errors.As(e, &ce), "%v", e)
		fields = append(fields, ce.Field)
	}
	require.Equal(t, []string{
		"Name", "WindowType", "FailureRateThreshold", "SlowCallRateThreshold", "SlowCallDurationThreshold",
		"FailureCountThreshold", "ConsecutiveFailures", "WindowSize", "BucketWidth",
		"MinimumNumberOfCalls", "PermittedCallsInHalfOpen", "SuccessesToClose", "OpenDuration",
		"MaxWaitInHalfOpen", "HalfOpenFullWait", "RampUpDuration", "MaxRetryAfter", "RampUpStartPercent",
		"InitialState",
	}, fields)
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
	require.Zero(t, s.BucketWidth)

	// A time window's buckets are a second wide unless set.
	s, err = core.Config{WindowType: core.TimeBased, FailureRateThreshold: 50}.Validate()
	require.NoError(t, err)
	require.Equal(t, time.Second, s.BucketWidth)
	s, err = core.Config{WindowType: core.TimeBased, FailureRateThreshold: 50, BucketWidth: 200 * time.Millisecond}.Validate()
	require.NoError(t, err)
	require.Equal(t, 200*time.Millisecond, s.BucketWidth)
	require.Equal(t, 100, s.WindowSize, "still seconds: 500 buckets")
	s, err = core.Config{WindowSize: 20, FailureRateThreshold: 50}.Validate()
	require.NoError(t, err)
	require.Zero(t, s.BucketWidth, "a count window has no buckets")

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
		{WindowType: core.TimeBased, WindowSize: core.MaxTimeWindow, BucketWidth: time.Second, FailureRateThreshold: 1},
		{WindowType: core.TimeBased, WindowSize: core.MaxTimeBuckets / 10, BucketWidth: core.MinBucketWidth, FailureRateThreshold: 1},
		{WindowType: core.TimeBased, WindowSize: 1, BucketWidth: core.MinBucketWidth, FailureRateThreshold: 1},
		{WindowType: core.TimeBased, WindowSize: core.MaxTimeBuckets / 8, BucketWidth: 125 * time.Millisecond, FailureRateThreshold: 1},
		{ConsecutiveFailures: 1, PermittedCallsInHalfOpen: core.MaxPermittedInHalf, SuccessesToClose: core.MaxPermittedInHalf, FailuresToReopen: core.MaxPermittedInHalf, OpenDuration: time.Nanosecond},
		{ConsecutiveFailures: 1, OpenDuration: core.MaxOpenDurationLimit},
		{ConsecutiveFailures: 1, OpenDuration: core.MaxOpenDurationLimit, OpenDurationJitter: 1},
		{ConsecutiveFailures: 1, OpenDurationFunc: openFor(time.Second), MaxOpenDuration: core.MaxOpenDurationLimit},
		{ConsecutiveFailures: 1, OpenDuration: time.Nanosecond, OpenDurationFunc: openFor(time.Second), MaxOpenDuration: time.Nanosecond, OpenDurationBackoff: 1},
		{ConsecutiveFailures: 1, OpenDurationJitter: math.SmallestNonzeroFloat64},
	} {
		for _, im := range impls {
			_, err := im.New(c)
			require.NoError(t, err, "%s %+v", im.Name, c)
		}
	}
}

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

// R3 for the max-wait, ramp-up and retry-after fields: a bad MaxWaitInHalfOpen, RampUpDuration,
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
				var b breakers.Breaker
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

// MaxOpenDuration above OpenDuration with no backoff (factor 0, "no
// backoff" per the Config doc) would cap nothing. Validate rejects it, and
// the error must name MaxOpenDuration, the field the user set, not
// OpenDurationBackoff, which the user left at zero (a message such as
// "factor 1 needs more than 31 re-opens" would blame the wrong field). R3
// does not list this rejection.
func TestMaxOpenDurationWithoutBackoffRejected(t *testing.T) {
	// A maximum without a factor would silently do nothing: rejected, naming
	// the field the user set.
	_, err := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, MaxOpenDuration: time.Minute}.Validate()
	var ce *core.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "MaxOpenDuration", ce.Field)
}
