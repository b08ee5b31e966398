package core_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// wall is the wall-clock time the snapshot tests take their snapshots at.
var wall = time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)

// restoreRig is build for a breaker restored from s at the wall-clock time
// now, on a manual clock reading start (a new process's clock).
func (mk maker) restoreRig(t testing.TB, c core.Config, s core.Snapshot, now time.Time, start time.Duration) *rig {
	t.Helper()
	return buildWith(t, c, func(c core.Config) (breakers.Breaker, error) { return mk.restore(c, s, now) }, start)
}

// Restarts that remember (docs/semantics.md, Restarts): each state, taken
// at the wall-clock time wall on one breaker and restored some wall-clock
// time later on a breaker whose own clock starts elsewhere, goes on as the
// rule says, on both implementations.
func TestSnapshot_RestoresEachState(t *testing.T) {
	base := core.Config{ConsecutiveFailures: 2, OpenDuration: 10 * time.Second,
		OpenDurationBackoff: 2, MaxOpenDuration: 40 * time.Second}
	cases := []struct {
		name  string
		cfg   core.Config
		setup func(r *rig) // brings the breaker where the snapshot is taken, at clock 0 on
		want  core.Snapshot
		after time.Duration // wall-clock time from the snapshot to the restore
		check func(t *testing.T, r *rig)
	}{{
		name:  "open, time left",
		cfg:   base,
		setup: func(r *rig) { r.XN(2, core.Failure); r.At(4) },
		want:  core.Snapshot{State: core.Open, Taken: wall, OpenUntil: wall.Add(6 * time.Second)},
		after: 2 * time.Second,
		check: func(t *testing.T, r *rig) {
			require.Equal(t, 4*time.Second, r.B.RetryAfter())
			r.Reject(core.ErrOpen)
			r.Clock.Advance(4*time.Second - 1)
			r.Reject(core.ErrOpen)
			r.Clock.Advance(1)
			require.True(t, r.A().Probe)
		},
	}, {
		// ForceOpen for a year, then the breaker clock steps back a second:
		// the live breaker has a year and a second to wait, more than any
		// open period; the snapshot carries the longest one, which encodes.
		name:  "open, more than the longest open period left",
		cfg:   base,
		setup: func(r *rig) { r.At(5); require.NoError(t, r.B.ForceOpen(core.MaxOpenDurationLimit)); r.At(4) },
		want:  core.Snapshot{State: core.Open, Taken: wall, OpenUntil: wall.Add(core.MaxOpenDurationLimit + time.Millisecond)},
		check: func(t *testing.T, r *rig) {
			require.Equal(t, core.MaxOpenDurationLimit+time.Millisecond, r.B.RetryAfter())
		},
	}, {
		name:  "open, deadline passed: the first call probes",
		cfg:   base,
		setup: func(r *rig) { r.XN(2, core.Failure); r.At(4) },
		want:  core.Snapshot{State: core.Open, Taken: wall, OpenUntil: wall.Add(6 * time.Second)},
		after: time.Hour,
		check: func(t *testing.T, r *rig) {
			require.Zero(t, r.B.RetryAfter())
			r.Is(core.HalfOpen)
			require.True(t, r.A().Probe)
			require.Equal(t, []string{"O>H@100"}, r.CBs())
		},
	}, {
		name:  "open, wall clock went back: never longer than was left",
		cfg:   base,
		setup: func(r *rig) { r.XN(2, core.Failure); r.At(4) },
		want:  core.Snapshot{State: core.Open, Taken: wall, OpenUntil: wall.Add(6 * time.Second)},
		after: -time.Hour,
		check: func(t *testing.T, r *rig) {
			require.Equal(t, 6*time.Second, r.B.RetryAfter())
		},
	}, {
		name: "open past an elapsed open duration, taken as Open",
		cfg:  base,
		setup: func(r *rig) {
			r.XN(2, core.Failure)
			r.At(12)
			r.Is(core.HalfOpen) // State reports it; the transition waits for a call
		},
		want:  core.Snapshot{State: core.Open, Taken: wall, OpenUntil: wall}, // no time left
		check: func(t *testing.T, r *rig) { require.True(t, r.A().Probe) },
	}, {
		name: "half-open keeps its backoff step",
		cfg:  base,
		setup: func(r *rig) {
			r.XN(2, core.Failure)
			r.At(10)
			r.D(r.A(), core.Failure) // re-open, step 1: 20 s
			r.At(30)
			r.A() // a probe of step 1, lost with the process
		},
		want: core.Snapshot{State: core.HalfOpen, Step: 1, Taken: wall},
		check: func(t *testing.T, r *rig) {
			c := r.B.Counts()
			require.Equal(t, core.Counts{State: core.HalfOpen}, c, "no probe in flight after a restart")
			r.D(r.A(), core.Failure) // re-open, step 2: 40 s
			require.Equal(t, 40*time.Second, r.B.RetryAfter())
		},
	}, {
		name:  "forced open stays forced open",
		cfg:   base,
		setup: func(r *rig) { require.NoError(r.t, r.B.ForceOpen(0)) },
		want:  core.Snapshot{State: core.ForcedOpen, Taken: wall},
		after: 1000 * time.Hour,
		check: func(t *testing.T, r *rig) { r.Reject(core.ErrForcedOpen) },
	}, {
		name:  "disabled stays disabled",
		cfg:   base,
		setup: func(r *rig) { r.B.Disable() },
		want:  core.Snapshot{State: core.Disabled, Taken: wall},
		check: func(t *testing.T, r *rig) { r.XN(5, core.Failure); r.Is(core.Disabled) },
	}, {
		name:  "metrics-only keeps its run of failures",
		cfg:   base,
		setup: func(r *rig) { r.B.MetricsOnly(); r.X(core.Failure) },
		want:  core.Snapshot{State: core.MetricsOnly, ConsecutiveFailures: 1, Taken: wall},
		check: func(t *testing.T, r *rig) {
			require.Equal(t, uint64(1), r.B.Counts().ConsecutiveFailures)
			r.X(core.Failure)
			require.Equal(t, []string{"M>M@100"}, r.CBs(), "would have opened on the second failure")
		},
	}, {
		name:  "closed keeps its count window and run of failures",
		cfg:   core.Config{FailureRateThreshold: 50, WindowSize: 4, ConsecutiveFailures: 3, SlowCallDurationThreshold: time.Second},
		setup: func(r *rig) { r.X(core.Success); r.X(core.Failure); slowCall(r, core.Success) },
		want: core.Snapshot{State: core.Closed, Taken: wall,
			Window: []core.WindowCall{core.CallSuccess, core.CallFailure, core.CallSlowSuccess}},
		check: func(t *testing.T, r *rig) {
			r.Cnt(3, 1, 1, 0)
			r.X(core.Failure) // 2 of 4: trips at 50 %
			r.Is(core.Open)
		},
	}, {
		name: "closed ramping up resumes the ramp for the time left",
		cfg:  core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, RampUpDuration: 10 * time.Second},
		setup: func(r *rig) {
			r.X(core.Failure)
			r.At(1)
			r.D(r.A(), core.Success) // closed at 1 s, ramping until 11 s
			r.At(5)
		},
		want:  core.Snapshot{State: core.Closed, Taken: wall, RampUntil: wall.Add(6 * time.Second)},
		after: 3 * time.Second,
		check: func(t *testing.T, r *rig) {
			shed := 0
			for range 200 {
				if !r.Try(core.Success) {
					shed++
				}
				r.Clock.Advance(time.Microsecond)
			}
			// 7 of 10 s into the ramp: about 70 % admitted.
			require.InDelta(t, 60, shed, 25, "calls shed 7 s into a 10 s ramp from 0 %%")
			r.Clock.Advance(3*time.Second - 200*time.Microsecond + time.Millisecond)
			r.XN(20, core.Success) // the ramp is over
		},
	}, {
		name:  "closed, window not taken",
		cfg:   core.Config{FailureRateThreshold: 50, WindowSize: 4},
		setup: func(r *rig) { r.X(core.Failure) },
		want:  core.Snapshot{State: core.Closed, Taken: wall},
		check: func(t *testing.T, r *rig) { r.Cnt(0, 0, 0, 0) },
	}}
	forEachImpl(t, func(t *testing.T, mk maker) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := mk.build(t, tc.cfg)
				tc.setup(r)
				withWindow := tc.name != "closed, window not taken"
				got, err := r.B.Snapshot(wall, withWindow)
				require.NoError(t, err)
				_, err = got.MarshalBinary()
				require.NoError(t, err, "every snapshot a breaker takes encodes")
				set, err := tc.cfg.Validate()
				require.NoError(t, err)
				tc.want.Fingerprint = set.Fingerprint()
				require.True(t, tc.want.Equal(got), "snapshot %+v, want %+v", got, tc.want)

				n := mk.restoreRig(t, tc.cfg, got, wall.Add(tc.after), 100*time.Second)
				c := n.B.Counts()
				if got.State != core.Open || got.OpenUntil.After(wall.Add(tc.after)) {
					require.Equal(t, got.State, c.State, "restored state")
				} else {
					require.Equal(t, core.HalfOpen, c.State, "an open breaker whose deadline passed reports half-open")
				}
				require.Zero(t, c.Generation, "restored at generation 0")
				require.Empty(t, n.CBs(), "a restore notifies nothing")
				again, err := n.B.Snapshot(wall.Add(tc.after), true)
				require.NoError(t, err)
				if tc.after >= 0 && tc.after < time.Hour {
					// Nothing moved on the new clock: the snapshot is the
					// same but for the time it was taken.
					want := got
					want.Taken = wall.Add(tc.after)
					require.True(t, want.Equal(again), "snapshot of the restored breaker %+v, want %+v", again, want)
				}
				tc.check(t, n)
			})
		}
	})
}

// slowCall is a call of outcome o that takes 2 s on r's clock.
func slowCall(r *rig, o core.Outcome) {
	r.t.Helper()
	p := r.A()
	r.Clock.Advance(2 * time.Second)
	r.D(p, o)
}

// sampleSnapshots are snapshots of every shape a breaker takes: each
// state, a backoff step, a run of failures, a ramp-up, a window, times at
// the ends of the range.
func sampleSnapshots(t testing.TB) []core.Snapshot {
	t.Helper()
	set, err := core.Config{FailureRateThreshold: 50, WindowSize: 8, ConsecutiveFailures: 5,
		SlowCallDurationThreshold: time.Second, OpenDurationBackoff: 2, MaxOpenDuration: 8 * time.Minute,
		RampUpDuration: time.Minute}.Validate()
	require.NoError(t, err)
	fp := set.Fingerprint()
	return []core.Snapshot{
		{Fingerprint: fp, State: core.Closed, Taken: wall},
		{Fingerprint: fp, State: core.Closed, Taken: wall, ConsecutiveFailures: 4, RampUntil: wall.Add(30 * time.Second),
			Window: []core.WindowCall{core.CallSuccess, core.CallFailure, core.CallSlowSuccess, core.CallSlowFailure}},
		{Fingerprint: fp, State: core.Open, Step: 3, Taken: wall, OpenUntil: wall.Add(7*time.Minute + time.Nanosecond)},
		{Fingerprint: fp, State: core.Open, Taken: wall, OpenUntil: wall.Add(-time.Hour)},
		{Fingerprint: fp, State: core.HalfOpen, Step: 2, Taken: wall},
		{Fingerprint: fp, State: core.ForcedOpen, Taken: time.Unix(0, math.MinInt64).UTC()},
		{Fingerprint: fp, State: core.Disabled, Taken: time.Unix(0, math.MaxInt64).UTC()},
		{Fingerprint: fp, State: core.MetricsOnly, Taken: time.Unix(0, 0).UTC(), ConsecutiveFailures: 1,
			Window: []core.WindowCall{core.CallFailure}},
	}
}

// Both forms decode to the snapshot they encode, and every snapshot a
// breaker of that config could take restores on both implementations.
func TestSnapshot_RoundTrips(t *testing.T) {
	cfg := core.Config{FailureRateThreshold: 50, WindowSize: 8, ConsecutiveFailures: 5,
		SlowCallDurationThreshold: time.Second, OpenDurationBackoff: 2, MaxOpenDuration: 8 * time.Minute,
		RampUpDuration: time.Minute}
	for _, s := range sampleSnapshots(t) {
		b, err := s.MarshalBinary()
		require.NoError(t, err)
		var fromBin core.Snapshot
		require.NoError(t, fromBin.UnmarshalBinary(b))
		require.True(t, s.Equal(fromBin), "binary %x: %+v, want %+v", b, fromBin, s)

		j, err := json.Marshal(s)
		require.NoError(t, err)
		var fromJSON core.Snapshot
		require.NoError(t, json.Unmarshal(j, &fromJSON))
		require.True(t, s.Equal(fromJSON), "JSON %s: %+v, want %+v", j, fromJSON, s)

		for _, im := range impls {
			_, err := im.Restore(cfg, s, wall)
			require.NoError(t, err, "%s restores %s", im.Name, j)
		}
	}
	s := sampleSnapshots(t)[2]
	j, err := json.Marshal(s)
	require.NoError(t, err)
	require.Equal(t, `{"version":1,"fingerprint":"`+fmt.Sprintf("%016x", s.Fingerprint)+
		`","state":"open","step":3,"taken":"2026-12-02T07:00:00Z","open_until":"2026-12-02T07:07:00.000000001Z"}`, string(j))
}

// reseal recomputes the checksum of a binary snapshot that a test changed.
func reseal(b []byte) []byte {
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
	return b
}

// Corrupt, cut short, future or inconsistent input is an error matching
// ErrInvalidSnapshot that says why, in either form, never a panic, and it
// leaves the destination as it was.
func TestSnapshot_RejectsCorruptInput(t *testing.T) {
	good, err := sampleSnapshots(t)[1].MarshalBinary()
	require.NoError(t, err)
	plain, err := sampleSnapshots(t)[0].MarshalBinary()
	require.NoError(t, err)
	metricsOnly, err := sampleSnapshots(t)[7].MarshalBinary()
	require.NoError(t, err)
	edit := func(src []byte, f func(b []byte)) []byte {
		b := append([]byte(nil), src...)
		f(b)
		return reseal(b)
	}
	binaryCases := []struct {
		name, why string
		in        []byte
	}{
		{"empty", "too short", nil},
		{"not a snapshot", "not a breaker snapshot", []byte("{\"version\":1}")},
		{"version 0", "version 0", edit(good, func(b []byte) { b[2] = 0 })},
		{"a future version", "version 2 is newer", edit(good, func(b []byte) { b[2] = 2 })},
		{"cut short", "checksum", good[:len(good)-1]},
		{"cut to the header", "at least 44", good[:20]},
		{"a flipped bit", "checksum", func() []byte { b := append([]byte(nil), good...); b[9] ^= 4; return b }()},
		{"unknown flags", "unknown flags", edit(good, func(b []byte) { b[5] |= 0x80 })},
		{"a state past the last", "not a state", edit(plain, func(b []byte) { b[3] = 6 })},
		{"a step past 31", "backoff step 32", edit(plain, func(b []byte) { b[3], b[4] = 1, 32 })},
		{"a step in closed", "backoff step 1 in state closed", edit(plain, func(b []byte) { b[4] = 1 })},
		{"open with no deadline", "open with no OpenUntil", edit(plain, func(b []byte) { b[3] = 1 })},
		{"a deadline with its flag clear", "OpenUntil holds", edit(plain, func(b []byte) { b[30] = 1 })},
		{"a window length that lies", "length byte", edit(good, func(b []byte) { b[40]++ })},
		{"a window call past 3", "not one of the four", edit(good, func(b []byte) { b[41] = 4 })},
		{"a window flag with no window", "length byte", edit(plain, func(b []byte) { b[5] |= 4 })},
		{"a window in half-open", "in state half-open", edit(metricsOnly, func(b []byte) { b[3], b[7] = 2, 0 })},
	}
	for _, tc := range binaryCases {
		t.Run("binary/"+tc.name, func(t *testing.T) {
			s := sampleSnapshots(t)[3]
			err := s.UnmarshalBinary(tc.in)
			require.ErrorIs(t, err, core.ErrInvalidSnapshot)
			require.Contains(t, err.Error(), tc.why)
			require.True(t, s.Equal(sampleSnapshots(t)[3]), "a failed decode changed its destination")
		})
	}
	// Every prefix of a good snapshot fails, and every single-bit error.
	for n := range len(good) {
		var s core.Snapshot
		require.ErrorIs(t, s.UnmarshalBinary(good[:n]), core.ErrInvalidSnapshot, "%d of %d bytes", n, len(good))
	}
	for i := range 8 * len(good) {
		b := append([]byte(nil), good...)
		b[i/8] ^= 1 << (i % 8)
		var s core.Snapshot
		require.ErrorIs(t, s.UnmarshalBinary(b), core.ErrInvalidSnapshot, "bit %d flipped", i)
	}

	const taken = `"taken":"2026-12-02T07:00:00Z"`
	jsonCases := []struct{ name, in, why string }{
		{"not JSON", `{"version":`, "unexpected EOF"},
		{"an array", `[1]`, "cannot unmarshal array"},
		{"no version", `{"fingerprint":"0000000000000001","state":"closed",` + taken + `}`, "no version"},
		{"a future version", `{"version":2,"fingerprint":"0000000000000001","state":"closed",` + taken + `}`, "version 2 is newer"},
		{"no fingerprint", `{"version":1,"state":"closed",` + taken + `}`, "no fingerprint"},
		{"a short fingerprint", `{"version":1,"fingerprint":"1","state":"closed",` + taken + `}`, "16 hex digits"},
		{"a fingerprint that is no hex", `{"version":1,"fingerprint":"000000000000000g","state":"closed",` + taken + `}`, "16 hex digits"},
		{"no state", `{"version":1,"fingerprint":"0000000000000001",` + taken + `}`, "no state"},
		{"an unknown state", `{"version":1,"fingerprint":"0000000000000001","state":"ajar",` + taken + `}`, `"ajar" is not a state`},
		{"no taken", `{"version":1,"fingerprint":"0000000000000001","state":"closed"}`, "no taken"},
		{"the zero taken", `{"version":1,"fingerprint":"0000000000000001","state":"closed","taken":"0001-01-01T00:00:00Z"}`, "zero time"},
		{"a taken past 2262", `{"version":1,"fingerprint":"0000000000000001","state":"closed","taken":"2300-01-01T00:00:00Z"}`, "outside the wall-clock range"},
		{"an unknown field", `{"version":1,"fingerprint":"0000000000000001","state":"closed",` + taken + `,"probes":1}`, "unknown field"},
		{"data after it", `{"version":1,"fingerprint":"0000000000000001","state":"closed",` + taken + `} {}`, "data after"},
		{"open_until in closed", `{"version":1,"fingerprint":"0000000000000001","state":"closed",` + taken + `,"open_until":"2026-12-02T07:00:01Z"}`, "OpenUntil"},
		{"open for two years", `{"version":1,"fingerprint":"0000000000000001","state":"open",` + taken + `,"open_until":"2028-12-02T07:00:01Z"}`, "above the longest open period"},
		{"a ramp that is over", `{"version":1,"fingerprint":"0000000000000001","state":"closed",` + taken + `,"ramp_until":"2026-12-02T07:00:00Z"}`, "is not after Taken"},
		{"a window letter", `{"version":1,"fingerprint":"0000000000000001","state":"closed",` + taken + `,"window":"sfx"}`, `'x', not one of "sfSF"`},
		{"a run of failures in open", `{"version":1,"fingerprint":"0000000000000001","state":"disabled",` + taken + `,"consecutive_failures":2}`, "counts none"},
		{"a negative step", `{"version":1,"fingerprint":"0000000000000001","state":"open",` + taken + `,"step":-1}`, "cannot unmarshal"},
		// encoding/json keeps the last of two equal keys and matches keys
		// case-insensitively: a snapshot that says two things, or names a
		// field otherwise, is refused rather than read one way.
		{"a state twice", `{"version":1,"fingerprint":"0000000000000001","state":"open","state":"closed",` + taken + `}`, `"state" twice`},
		{"a version twice", `{"version":2,"version":1,"fingerprint":"0000000000000001","state":"closed",` + taken + `}`, `"version" twice`},
		{"a field in capitals", `{"VERSION":1,"fingerprint":"0000000000000001","state":"closed",` + taken + `}`, `unknown field "VERSION"`},
		{"a field twice by case", `{"version":1,"fingerprint":"0000000000000001","state":"open","State":"closed",` + taken + `}`, `unknown field "State"`},
	}
	for _, tc := range jsonCases {
		t.Run("json/"+tc.name, func(t *testing.T) {
			s := sampleSnapshots(t)[3]
			err := s.UnmarshalJSON([]byte(tc.in)) // json.Unmarshal would refuse bad syntax before it
			require.ErrorIs(t, err, core.ErrInvalidSnapshot)
			require.Contains(t, err.Error(), tc.why)
			require.True(t, s.Equal(sampleSnapshots(t)[3]), "a failed decode changed its destination")
		})
	}

	// What no breaker could have taken does not encode either.
	for _, s := range []core.Snapshot{{}, {State: core.Open, Taken: wall}, {State: 9, Taken: wall},
		{Taken: wall, Window: make([]core.WindowCall, 256)}} {
		_, err := s.MarshalBinary()
		require.ErrorIs(t, err, core.ErrInvalidSnapshot, "%+v", s)
		_, err = s.MarshalJSON()
		require.ErrorIs(t, err, core.ErrInvalidSnapshot, "%+v", s)
	}
}

// A snapshot restores only a breaker whose config gives it the same
// meaning (Settings.Fingerprint), and only what a breaker of that config
// could have been; the errors say why, on both implementations. Config
// errors come first, as from New.
func TestRestore_RefusesWhatDoesNotFit(t *testing.T) {
	cfg := core.Config{FailureRateThreshold: 50, WindowSize: 8, MinimumNumberOfCalls: 4, ConsecutiveFailures: 5,
		SlowCallDurationThreshold: time.Second, OpenDurationBackoff: 2, MaxOpenDuration: 8 * time.Minute,
		RampUpDuration: time.Minute}
	set, err := cfg.Validate()
	require.NoError(t, err)
	fp := set.Fingerprint()
	open := core.Snapshot{Fingerprint: fp, State: core.Open, Taken: wall, OpenUntil: wall.Add(time.Minute)}
	closed := core.Snapshot{Fingerprint: fp, State: core.Closed, Taken: wall}
	with := func(s core.Snapshot, f func(*core.Snapshot)) core.Snapshot { f(&s); return s }
	changed := func(f func(*core.Config)) core.Config { c := cfg; f(&c); return c }

	mismatches := map[string]core.Config{
		"window type":    changed(func(c *core.Config) { c.WindowType = core.TimeBased }),
		"window size":    changed(func(c *core.Config) { c.WindowSize = 9 }),
		"failure rate":   changed(func(c *core.Config) { c.FailureRateThreshold = 60 }),
		"slow rate":      changed(func(c *core.Config) { c.SlowCallRateThreshold = 60 }),
		"slow duration":  changed(func(c *core.Config) { c.SlowCallDurationThreshold = 2 * time.Second }),
		"failure count":  changed(func(c *core.Config) { c.FailureCountThreshold = 3 }),
		"minimum calls":  changed(func(c *core.Config) { c.MinimumNumberOfCalls = 5 }),
		"consecutive":    changed(func(c *core.Config) { c.ConsecutiveFailures = 6 }),
		"open duration":  changed(func(c *core.Config) { c.OpenDuration = time.Minute + time.Millisecond }),
		"backoff":        changed(func(c *core.Config) { c.OpenDurationBackoff = 3 }),
		"max open":       changed(func(c *core.Config) { c.MaxOpenDuration = 9 * time.Minute }),
		"permitted":      changed(func(c *core.Config) { c.PermittedCallsInHalfOpen = 2 }),
		"successes":      changed(func(c *core.Config) { c.PermittedCallsInHalfOpen, c.SuccessesToClose = 3, 2 }),
		"ramp-up":        changed(func(c *core.Config) { c.RampUpDuration = 2 * time.Minute }),
		"no consecutive": changed(func(c *core.Config) { c.ConsecutiveFailures = 0 }),
		"reopen after":   changed(func(c *core.Config) { c.PermittedCallsInHalfOpen, c.FailuresToReopen = 3, 2 }),
		"a function": changed(func(c *core.Config) {
			c.OpenDurationBackoff, c.OpenDurationFunc = 0, func(int, error) time.Duration { return time.Minute }
		}),
	}
	same := map[string]core.Config{
		"name":          changed(func(c *core.Config) { c.Name = "other" }),
		"max wait":      changed(func(c *core.Config) { c.MaxWaitInHalfOpen = core.WaitForever }),
		"hints":         changed(func(c *core.Config) { c.MaxRetryAfter = time.Minute }),
		"metrics":       changed(func(c *core.Config) { c.CollectMetrics = true }),
		"initial state": changed(func(c *core.Config) { c.InitialState = core.ForcedOpen }),
		"ramp start":    changed(func(c *core.Config) { c.RampUpStartPercent = 10 }),
		"jitter":        changed(func(c *core.Config) { c.OpenDurationJitter = 0.5 }),
	}
	refused := []struct {
		name string
		s    core.Snapshot
		why  string
	}{
		{"the zero snapshot", core.Snapshot{}, "no Taken time"},
		{"a step the backoff never reaches", with(open, func(s *core.Snapshot) { s.Step = 4 }), "backoff step 4 is past the config's last, 3"},
		{"a ramp-up longer than the config's", with(closed, func(s *core.Snapshot) { s.RampUntil = wall.Add(2 * time.Minute) }), "above the config's ramp-up"},
		{"a window longer than the config's", with(closed, func(s *core.Snapshot) { s.Window = make([]core.WindowCall, 9) }), "the config's window is 8 calls"},
	}
	// A time window's bucket width changes what its seconds mean.
	timed := core.Config{FailureRateThreshold: 50, WindowType: core.TimeBased, WindowSize: 2}
	whole, err := timed.Validate()
	require.NoError(t, err)
	timed.BucketWidth = 500 * time.Millisecond
	halves, err := timed.Validate()
	require.NoError(t, err)
	require.NotEqual(t, whole.Fingerprint(), halves.Fingerprint(), "bucket width")
	for _, im := range impls {
		t.Run(im.Name, func(t *testing.T) {
			for name, c := range mismatches {
				_, err := im.Restore(c, open, wall)
				require.ErrorIs(t, err, core.ErrSnapshotMismatch, name)
				require.ErrorIs(t, err, core.ErrInvalidSnapshot, name)
				require.Contains(t, err.Error(), "fingerprint", name)
			}
			for name, c := range same {
				_, err := im.Restore(c, open, wall)
				require.NoError(t, err, name)
			}
			for _, tc := range refused {
				_, err := im.Restore(cfg, tc.s, wall)
				require.ErrorIs(t, err, core.ErrInvalidSnapshot, tc.name)
				require.NotErrorIs(t, err, core.ErrSnapshotMismatch, tc.name)
				require.Contains(t, err.Error(), tc.why, tc.name)
			}
			_, err := im.Restore(core.Config{}, open, wall)
			require.ErrorIs(t, err, core.ErrInvalidConfig, "the config is checked first")
			_, err = im.Restore(cfg, open, time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC))
			require.ErrorIs(t, err, core.ErrInvalidArgument)
			require.Contains(t, err.Error(), "Restore: now")
			b, err := im.New(cfg)
			require.NoError(t, err)
			_, err = b.Snapshot(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), false)
			require.ErrorIs(t, err, core.ErrInvalidArgument)
			require.Contains(t, err.Error(), "Snapshot: now")
		})
	}
}

// A snapshot taken while goroutines record, trip and probe is always one a
// breaker of that config could have been in: it encodes, it passes
// CheckFor, it restores, on both implementations, and, closed, it holds no
// window that trips the rule and no run of failures at the threshold (a
// record and its trip are one step).
func TestSnapshot_ConcurrentWithTraffic(t *testing.T) {
	cfg := core.Config{FailureRateThreshold: 50, WindowSize: 10, MinimumNumberOfCalls: 4, ConsecutiveFailures: 3,
		OpenDuration: time.Millisecond, PermittedCallsInHalfOpen: 2}
	set, err := cfg.Validate()
	require.NoError(t, err)
	rounds := rounds(2000, 300)
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, cfg)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if p, err := r.B.Allow(); err == nil {
						r.B.Record(p, core.Outcome((i+g)%2)) // as many failures as successes: at the rate threshold
					}
					if i%16 == 0 {
						r.Clock.Advance(time.Millisecond)
					}
				}
			}()
		}
		states := snapshotsUnderTraffic(t, mk, r, set, cfg, rounds)
		close(stop)
		wg.Wait()
		t.Logf("snapshots by state: %v", states)
	})
}

// FuzzSnapshot feeds arbitrary bytes to both decoders. Neither may panic;
// what one accepts re-encodes to a snapshot Equal to it (the binary form
// to the very bytes it came from), and both implementations restore it, or
// both refuse it with the same error, and a restored pair agrees on State,
// Counts and RetryAfter.
func FuzzSnapshot(f *testing.F) {
	cfg := core.Config{FailureRateThreshold: 50, WindowSize: 8, ConsecutiveFailures: 5,
		SlowCallDurationThreshold: time.Second, OpenDurationBackoff: 2, MaxOpenDuration: 8 * time.Minute,
		RampUpDuration: time.Minute, Clock: core.NewManualClock(0)}
	for _, s := range sampleSnapshots(f) {
		b, err := s.MarshalBinary()
		require.NoError(f, err)
		f.Add(b)
		j, err := s.MarshalJSON()
		require.NoError(f, err)
		f.Add(j)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var fromBin, fromJSON core.Snapshot
		if err := fromBin.UnmarshalBinary(in); err == nil {
			out, err := fromBin.MarshalBinary()
			require.NoError(t, err)
			require.Equal(t, in, out, "the binary form is canonical")
			restoreBoth(t, cfg, fromBin)
		} else {
			require.ErrorIs(t, err, core.ErrInvalidSnapshot)
		}
		if err := fromJSON.UnmarshalJSON(in); err == nil {
			out, err := fromJSON.MarshalJSON()
			require.NoError(t, err)
			var again core.Snapshot
			require.NoError(t, again.UnmarshalJSON(out))
			require.True(t, fromJSON.Equal(again), "%s re-encodes as %s", in, out)
			restoreBoth(t, cfg, fromJSON)
		} else {
			require.ErrorIs(t, err, core.ErrInvalidSnapshot)
		}
	})
}

// restoreBoth restores s on every implementation from cfg at wall and
// requires that they agree.
func restoreBoth(t *testing.T, cfg core.Config, s core.Snapshot) {
	t.Helper()
	var first breakers.Breaker
	var firstErr error
	for i, im := range impls {
		b, err := im.Restore(cfg, s, wall)
		if i == 0 {
			first, firstErr = b, err
			continue
		}
		if firstErr != nil || err != nil {
			require.Equal(t, fmt.Sprint(firstErr), fmt.Sprint(err), "restore of %+v", s)
			continue
		}
		require.Equal(t, first.State(), b.State())
		require.Equal(t, first.Counts(), b.Counts())
		require.Equal(t, first.RetryAfter(), b.RetryAfter())
	}
}

// A snapshot taken near the end of the span the formats keep, of a
// breaker whose deadline lies past it, is refused with an error that names
// the deadline, on both implementations: Snapshot never returns what
// MarshalBinary and Restore refuse.
func TestSnapshot_DeadlinePastTheSpan(t *testing.T) {
	last := time.Unix(0, math.MaxInt64).UTC()
	for _, im := range impls {
		t.Run(im.Name, func(t *testing.T) {
			b, err := im.New(core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, RampUpDuration: time.Minute,
				Clock: core.NewManualClock(0)})
			require.NoError(t, err)
			require.NoError(t, b.ForceOpen(time.Hour))
			_, err = b.Snapshot(last.Add(-time.Minute), false)
			require.ErrorIs(t, err, core.ErrInvalidArgument)
			require.Contains(t, err.Error(), "OpenUntil")
			s, err := b.Snapshot(last.Add(-time.Hour-time.Second), false)
			require.NoError(t, err, "an hour left fits")
			_, err = s.MarshalBinary()
			require.NoError(t, err)

			b.HalfOpen()
			p, err := b.Allow()
			require.NoError(t, err)
			b.Done(p, nil) // closed, ramping up for a minute
			require.Equal(t, core.Closed, b.State())
			_, err = b.Snapshot(last.Add(-time.Second), false)
			require.ErrorIs(t, err, core.ErrInvalidArgument)
			require.Contains(t, err.Error(), "RampUntil")
		})
	}
}

// A half-open breaker that has tolerated probe failures (FailuresToReopen)
// restores with its verdict started over, as its successes do: the
// snapshot does not carry them, on both implementations.
func TestSnapshot_HalfOpenStartsItsVerdictOver(t *testing.T) {
	cfg := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 3,
		SuccessesToClose: 2, FailuresToReopen: 2, Clock: core.NewManualClock(0)}
	for _, im := range impls {
		t.Run(im.Name, func(t *testing.T) {
			b, err := im.New(cfg)
			require.NoError(t, err)
			b.HalfOpen()
			p, err := b.Allow()
			require.NoError(t, err)
			b.Done(p, errFail)
			require.Equal(t, 1, b.Counts().ProbeFailures, "tolerated")
			s, err := b.Snapshot(wall, false)
			require.NoError(t, err)
			require.Equal(t, core.HalfOpen, s.State)
			cfg.Clock = core.NewManualClock(0)
			r, err := im.Restore(cfg, s, wall)
			require.NoError(t, err)
			require.Zero(t, r.Counts().ProbeFailures)
			p, err = r.Allow()
			require.NoError(t, err)
			r.Done(p, errFail)
			require.Equal(t, core.HalfOpen, r.State(), "the first failure after the restore is tolerated")
			p, err = r.Allow()
			require.NoError(t, err)
			r.Done(p, errFail)
			require.Equal(t, core.Open, r.State())
		})
	}
}

// tallyGate is an OpenGate with no cap that counts the slots its breaker
// holds, and any Release past them.
type tallyGate struct{ held, over atomic.Int64 }

func (g *tallyGate) TryAcquire() bool { g.held.Add(1); return true }
func (g *tallyGate) Acquire()         { g.held.Add(1) }
func (g *tallyGate) Release() {
	if g.held.Add(-1) < 0 {
		g.over.Add(1)
	}
}

// A snapshot taken while goroutines trip, probe (tolerating failures) and
// apply every manual control, on a breaker with an open-duration function,
// jitter, a ramp-up and an open gate, is still one the breaker could have
// been in: it passes CheckFor, encodes and restores; and the gate holds a
// slot exactly while the breaker is ejected once the goroutines are done,
// never released past what it holds. On both implementations, under -race.
func TestSnapshot_ConcurrentWithControls(t *testing.T) {
	rounds := rounds(2000, 300)
	forEachImpl(t, func(t *testing.T, mk maker) {
		gate := new(tallyGate)
		cfg := core.Config{FailureRateThreshold: 50, WindowSize: 6, MinimumNumberOfCalls: 2, ConsecutiveFailures: 4,
			OpenDuration: time.Millisecond, MaxOpenDuration: 5 * time.Millisecond,
			OpenDurationFunc:         func(reopens int, _ error) time.Duration { return time.Duration(reopens) * time.Millisecond },
			OpenDurationJitter:       0.5,
			PermittedCallsInHalfOpen: 4, SuccessesToClose: 2, FailuresToReopen: 2, RampUpDuration: 3 * time.Millisecond,
			OpenGate: gate}
		r := mk.build(t, cfg)
		set, err := cfg.Validate()
		require.NoError(t, err)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for g := range 3 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if p, err := r.B.Allow(); err == nil {
						r.B.Record(p, []core.Outcome{core.Failure, core.Success, core.Success}[(i+g)%3]) // below the rate
					}
					if i%8 == 0 {
						r.Clock.Advance(time.Millisecond)
					}
				}
			})
		}
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				switch i % 7 {
				case 0:
					_ = r.B.ForceOpen(time.Duration(i%3) * time.Millisecond)
				case 1:
					r.B.HalfOpen()
				case 2:
					r.B.Reset()
				case 3:
					r.B.Disable()
				case 4:
					r.B.MetricsOnly()
				case 5:
					r.B.Reset()
				}
				runtime.Gosched()
			}
		})
		restoreCfg := cfg
		restoreCfg.OpenGate = new(tallyGate)
		states := snapshotsUnderTraffic(t, mk, r, set, restoreCfg, rounds)
		close(stop)
		wg.Wait()
		want := int64(0)
		if st := r.B.State(); st == core.Open || st == core.HalfOpen || st == core.ForcedOpen {
			want = 1
		}
		require.Equal(t, want, gate.held.Load(), "slots held in state %v", r.B.State())
		require.Zero(t, gate.over.Load(), "releases past the slots held")
		t.Logf("snapshots by state: %v", states)
	})
}

// An open breaker left without a call for longer than its deadline's exact
// range (2^35 ms, about 397 days: docs/design.md, Known limits) is snapshot
// as it reads: the baseline with its deadline passed, so the first call
// after the restore probes; the lock-free breaker, which reads an aliased
// wait of up to 397 days, with the longest wait a snapshot carries,
// MaxOpenDurationLimit and a millisecond, rather than one no decoder or
// Restore takes. Both encode and restore.
func TestSnapshot_OpenPastTheDeadlineRange(t *testing.T) {
	cfg := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second}
	for _, im := range impls {
		t.Run(im.Name, func(t *testing.T) {
			clock := core.NewManualClock(0)
			c := cfg
			c.Clock = clock
			b, err := im.New(c)
			require.NoError(t, err)
			p, err := b.Allow()
			require.NoError(t, err)
			b.Done(p, errFail) // open until 1 s
			clock.Set(time.Second + time.Duration(1<<35)*time.Millisecond + 24*time.Hour)
			s, err := b.Snapshot(wall, false)
			require.NoError(t, err)
			require.Equal(t, core.Open, s.State)
			_, err = s.MarshalBinary()
			require.NoError(t, err)
			c.Clock = core.NewManualClock(0)
			r, err := im.Restore(c, s, wall)
			require.NoError(t, err)
			if !s.OpenUntil.Equal(wall) {
				require.Equal(t, wall.Add(core.MaxOpenDurationLimit+time.Millisecond), s.OpenUntil)
				require.Equal(t, core.Open, r.State())
				return // the lock-free breaker's aliased wait
			}
			p, err = r.Allow()
			require.NoError(t, err)
			require.True(t, p.Probe)
		})
	}
}

// rampingAtTwoAndAHalfMillis is a breaker of im made from c (the ramp-up
// tests' config, on its own manual clock) closed by a probe at 2.5 ms, so
// ramping up to the unit boundary at or after 2052.5 ms: 2055 ms.
func rampingAtTwoAndAHalfMillis(t *testing.T, im breakers.Impl, c core.Config) (breakers.Breaker, *core.ManualClock) {
	t.Helper()
	clock := core.NewManualClock(0)
	c.Clock = clock
	b, err := im.New(c)
	require.NoError(t, err)
	b.HalfOpen()
	p, err := b.Allow()
	require.NoError(t, err)
	clock.Set(2500 * time.Microsecond)
	b.Done(p, nil)
	return b, clock
}

// A ramp-up restores for the time left whatever the phase of the new
// process's clock within the ramp's units: a ramp that started just past
// one of its unit boundaries has up to a unit more than its duration left
// to its deadline's boundary, and a restore at a later phase of a unit
// must not read that as a deadline further ahead than any ramp sets (the
// rule for a clock that went back: over) and drop the ramp. On both
// implementations.
func TestSnapshot_RampUpRestoresAtAnyPhase(t *testing.T) {
	// Units of 3 ms (2050 ms / 1024, rounded up to whole milliseconds):
	// 684 of them are 2052 ms, a ramp set never more than 685 ahead.
	cfg := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, RampUpDuration: 2050 * time.Millisecond}
	for _, im := range impls {
		t.Run(im.Name, func(t *testing.T) {
			c := cfg
			b, _ := rampingAtTwoAndAHalfMillis(t, im, c)
			s, err := b.Snapshot(wall, false)
			require.NoError(t, err)
			require.Equal(t, wall.Add(2052500*time.Microsecond), s.RampUntil)
			for _, phase := range []time.Duration{0, 2400 * time.Microsecond, 2600 * time.Microsecond, 3*time.Millisecond - 1} {
				c.Clock = core.NewManualClock(300*time.Millisecond + phase)
				r, err := im.Restore(c, s, wall)
				require.NoError(t, err)
				again, err := r.Snapshot(wall, false)
				require.NoError(t, err)
				require.False(t, again.RampUntil.IsZero(), "phase %v: the ramp-up was dropped", phase)
				require.InDelta(t, float64(2052500*time.Microsecond), float64(again.RampUntil.Sub(wall)), float64(3*time.Millisecond),
					"phase %v: the time left, to within a unit", phase)
			}
		})
	}
}

// A ramp-up whose breaker clock went back by less than one of its units
// after it started (a Clock may go back: R14) is snapshot with the time
// left that the breaker itself waits for, which may be up to a unit more
// than the ramp-up: that snapshot restores, on both implementations.
func TestSnapshot_RampUpAfterTheClockWentBack(t *testing.T) {
	// Units of 3 ms (2050 ms / 1024, rounded up to whole milliseconds):
	// 684 of them are 2052 ms.
	cfg := core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, RampUpDuration: 2050 * time.Millisecond}
	for _, im := range impls {
		t.Run(im.Name, func(t *testing.T) {
			c := cfg
			b, clock := rampingAtTwoAndAHalfMillis(t, im, c)
			clock.Set(0)
			s, err := b.Snapshot(wall, false)
			require.NoError(t, err)
			require.False(t, s.RampUntil.IsZero())
			c.Clock = core.NewManualClock(0)
			_, err = im.Restore(c, s, wall)
			require.NoError(t, err, "RampUntil %v after Taken", s.RampUntil.Sub(s.Taken))
		})
	}
}

// snapshotsUnderTraffic takes rounds snapshots of r's breaker, whose
// traffic runs meanwhile, and holds each to be a snapshot of set that
// encodes and that mk restores from restore: what a snapshot taken
// concurrently must be. It returns how many it took in each state.
func snapshotsUnderTraffic(t *testing.T, mk maker, r *rig, set core.Settings, restore core.Config, rounds int) map[core.State]int {
	t.Helper()
	states := map[core.State]int{}
	for range rounds {
		s, err := r.B.Snapshot(wall, true)
		require.NoError(t, err)
		require.NoError(t, s.CheckFor(set))
		if s.State == core.Closed {
			require.False(t, tripsUntouched(set, s), "a closed snapshot whose window or run trips: %+v", s)
		}
		_, err = s.MarshalBinary()
		require.NoError(t, err)
		_, err = mk.restore(restore, s, wall)
		require.NoError(t, err)
		states[s.State]++
	}
	return states
}

// tripsUntouched reports whether the closed snapshot s holds a run of
// failures or a count window that set's failure-rate or consecutive rule
// trips on (the rules snapshotsUnderTraffic's configs use).
func tripsUntouched(set core.Settings, s core.Snapshot) bool {
	if set.ConsecutiveFailures > 0 && uint64(s.ConsecutiveFailures) >= uint64(set.ConsecutiveFailures) {
		return true
	}
	var calls, failures int
	for _, c := range s.Window {
		calls++
		if c.Failure() {
			failures++
		}
	}
	return set.FailureRateThreshold > 0 && calls >= set.MinimumNumberOfCalls && failures*100 >= set.FailureRateThreshold*calls
}
