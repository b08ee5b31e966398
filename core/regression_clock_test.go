package core_test

// Regressions in the clock and the open deadline (B19, B25 and B29 of
// docs/regressions.md): only the monotonic reading decides, the state and its
// deadline change together, and the open duration runs from the commit.

import (
	"context"
	"errors"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// B19 (unit). exaring/hoglet PR #25: opened-at was stored as Unix time,
// which drops Go's monotonic reading, so a wall-clock step could pin the
// breaker open or skip the open period. The default clock must be monotonic.
func TestRegression_DefaultClockNeverGoesBackwards(t *testing.T) {
	c := core.NewSystemClock()
	first := c.Now()
	require.GreaterOrEqual(t, first, time.Duration(0))
	require.Less(t, first, time.Minute, "the default clock measures from a base taken at construction, not the Unix epoch")

	const workers = 8
	total := rounds(1_000_000, 100_000)
	var published atomic.Int64 // the largest reading any goroutine has published
	var faults regFaults
	parallel(workers, func(g int) {
		prev := time.Duration(-1)
		for i := range total / workers {
			seen := time.Duration(published.Load())
			now := c.Now()
			// now was read after seen was published, so it may not be smaller.
			if now < prev || now < seen {
				faults.add("goroutine %d read %d: %v after own %v and published %v", g, i, now, prev, seen)
			}
			prev = now
			for {
				p := published.Load()
				if int64(now) <= p || published.CompareAndSwap(p, int64(now)) {
					break
				}
			}
		}
	})
	faults.check(t)

	// A config without a clock gets this clock, started at construction.
	s, err := core.Config{FailureRateThreshold: 50}.Validate()
	require.NoError(t, err)
	require.IsType(t, core.SystemClock{}, s.Clock)
	require.GreaterOrEqual(t, s.Clock.Now(), time.Duration(0))
	require.Less(t, s.Clock.Now(), time.Minute)
}

// regMonoWallClock is an injected clock with a monotonic reading M (what
// Now returns) and a separate wall reading W that an NTP step or an operator
// may move at will.
type regMonoWallClock struct{ mono, wall atomic.Int64 }

func (c *regMonoWallClock) Now() time.Duration { return time.Duration(c.mono.Load()) }
func (c *regMonoWallClock) Wall() time.Time    { return time.Unix(0, c.wall.Load()) }

func (c *regMonoWallClock) setMono(ms int64) {
	c.mono.Store(int64(time.Duration(ms) * time.Millisecond))
}

func (c *regMonoWallClock) stepWall(d time.Duration) { c.wall.Add(int64(d)) }

// B19 (scenario). exaring/hoglet PR #25 and fabfuel/circuitbreaker PR #31: a
// wall clock set a day ahead and then corrected kept a breaker open far longer
// than configured (or skipped the open period). Only the monotonic reading
// may decide.
func TestRegression_WallClockStepsDoNotMoveOpenDeadline(t *testing.T) {
	for _, sign := range []time.Duration{1, -1} {
		forEachImpl(t, func(t *testing.T, mk maker) {
			clk := &regMonoWallClock{}
			clk.wall.Store(time.Date(2024, 3, 10, 1, 59, 0, 0, time.UTC).UnixNano())
			r := mk.build(t, core.Config{WindowSize: 4, FailureRateThreshold: 50, MinimumNumberOfCalls: 2,
				OpenDuration: 10 * time.Second, Clock: clk})
			clk.setMono(0)
			r.XN(2, F)
			r.Is(core.Open)
			clk.setMono(5000)
			clk.stepWall(sign * 24 * time.Hour)
			r.Reject(core.ErrOpen)
			r.Is(core.Open)
			clk.setMono(6000)
			clk.stepWall(-sign * 24 * time.Hour)
			r.Reject(core.ErrOpen)
			clk.setMono(9999)
			clk.stepWall(sign * 365 * 24 * time.Hour)
			r.Reject(core.ErrOpen)
			r.Is(core.Open)
			clk.setMono(10000)
			r.Is(core.HalfOpen)
			r.A()
			require.Equal(t, []string{"C>O@0", "O>H@10"}, r.CBs())
		})
	}
}

// regCodeLines returns the Go source src without comments, as the
// concatenated tokens of each line (no spaces between punctuation, so
// "time . Unix" reads "time.Unix"), keyed by line number.
func regCodeLines(name string, src []byte) (map[int]string, error) {
	fset := token.NewFileSet()
	file := fset.AddFile(name, -1, len(src))
	var errs scanner.ErrorList
	var s scanner.Scanner
	s.Init(file, src, func(pos token.Position, msg string) { errs.Add(pos, msg) }, 0)
	lines := map[int]string{}
	prevWord, prevLine := false, 0
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue // inserted at the end of a line
		}
		line := fset.Position(pos).Line
		text := lit
		if text == "" {
			text = tok.String()
		}
		word := tok == token.IDENT || tok.IsKeyword() || tok.IsLiteral()
		if word && prevWord && line == prevLine {
			lines[line] += " "
		}
		lines[line] += text
		prevWord, prevLine = word, line
	}
	return lines, errs.Err()
}

// B19 (code review as a static check). exaring/hoglet PR #25: timing went
// through Unix microseconds, dropping the monotonic reading. No non-test
// source of the breakers or windows may convert through Unix time or strip
// the monotonic reading (Round(0), UTC(), Local(), In()). Comments are not
// code and are skipped. The snapshot files are exempt: they keep wall-clock
// times that the caller hands in (Unix nanoseconds in UTC, the format),
// and time nothing with them; the breaker clock's readings they pair them
// with stay durations.
func TestRegression_NoTimingPathDropsMonotonicReading(t *testing.T) {
	banned := []string{"time.Unix", "UnixNano", "UnixMicro", "UnixMilli", ".Round(0)", ".UTC()", ".Local()", ".In("}
	wallTimes := map[string]bool{"snapshot.go": true, "snapshot_codec.go": true, "../baseline/snapshot.go": true}

	// The scanner itself: a banned call in a comment is fine, in code it is not.
	self, err := regCodeLines("self.go", []byte("package p\n// time.Unix(0, 0).UTC()\nvar x = t . UnixNano ( )\nvar y = t.Round(0)\n"))
	require.NoError(t, err)
	require.NotContains(t, self[2], "time.Unix")
	require.Equal(t, "var x=t.UnixNano()", self[3])
	require.Contains(t, self[4], ".Round(0)")

	var found []string
	for _, dir := range []string{".", "../baseline", "../window"} {
		scanned := 0
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || wallTimes[path] {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			lines, err := regCodeLines(path, src)
			if err != nil {
				return err
			}
			scanned++
			for n, code := range lines {
				for _, b := range banned {
					if strings.Contains(code, b) {
						found = append(found, fmt.Sprintf("%s:%d: %q in %q", path, n, b, code))
					}
				}
			}
			return nil
		})
		require.NoError(t, err)
		require.NotZero(t, scanned, "no Go source found under %s", dir)
	}
	sort.Strings(found)
	require.Empty(t, found, "timing code must stay on the monotonic clock (R14)")
}

// B25. Netflix/Hystrix PR #1640 / #1665: status and opened-at were separate
// fields; a race left them contradicting each other and the breaker stopped
// tripping for good at ~90 % errors. Stress it, checking snapshots as we go,
// then check that it still trips, probes and closes exactly.
func TestRegression_StateAndDeadlineNeverDriftUnderStress(t *testing.T) {
	workers, calls := 32, 50_000
	if testing.Short() {
		workers, calls = 8, 2_000
	}
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{WindowSize: 20, FailureRateThreshold: 50, MinimumNumberOfCalls: 10,
			OpenDuration: regDriftOpen, PermittedCallsInHalfOpen: 1})
		if !t.Run("stress", func(t *testing.T) { regDriftStress(t, r, workers, calls) }) {
			return
		}
		t.Run("afterwards it trips, probes and closes exactly", func(t *testing.T) { regDriftAfterwards(t, r) })
	})
}

// regDriftOpen is B25's open duration: short, so that the stress trips,
// probes and closes many times over.
const regDriftOpen = time.Millisecond

// regDriftStress runs workers callers of calls each (60 percent failures)
// while one goroutine moves the clock 100 µs a tick and another checks every
// snapshot, then checks the totals and the chain of notifications.
func regDriftStress(t *testing.T, r *rig, workers, calls int) {
	var faults regFaults
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { // the clock: 100 µs per tick
		for {
			select {
			case <-stop:
				return
			default:
			}
			r.Clock.Advance(100 * time.Microsecond)
			time.Sleep(20 * time.Microsecond)
		}
	})
	var checks atomic.Int64
	bg.Go(func() { // the checker
		var lastGen uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			checks.Add(1)
			lastGen = regDriftCheck(r, &faults, lastGen)
		}
	})

	var ok, failed, rejected atomic.Int64
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		parallel(workers, func(int) {
			ctx := context.Background()
			for i := range calls {
				fail := i%5 < 3
				err := r.call(ctx, func(context.Context) error {
					if fail {
						return errFail
					}
					return nil
				})
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, errFail):
					failed.Add(1)
				case errors.Is(err, core.ErrRejected):
					rejected.Add(1)
				default:
					faults.add("Execute: unexpected error %v", err)
				}
			}
		})
	}()
	// Watchdog: a stuck notification dispatcher would hang the callers
	// that must publish; fail with a diagnosis instead of hanging.
	select {
	case <-finished:
	case <-time.After(2 * time.Minute):
		close(stop)
		t.Fatalf("callers still running after 2m: generation %d, %d notifications delivered",
			r.B.Counts().Generation, len(r.Transitions()))
	}
	close(stop)
	bg.Wait()
	faults.check(t)
	require.EqualValues(t, workers*calls, ok.Load()+failed.Load()+rejected.Load())
	require.NotZero(t, rejected.Load(), "the breaker never tripped under 60 percent failures")
	require.NotZero(t, checks.Load())

	// Notifications: one per transition, in order, chained (R12).
	trs := r.Transitions()
	require.EqualValues(t, len(trs), r.B.Counts().Generation, "one notification per committed transition")
	from := core.Closed
	for i, tr := range trs {
		require.EqualValues(t, i+1, tr.Generation)
		require.Equal(t, from, tr.From, "notification %d", i)
		from = tr.To
	}
	require.NotEmpty(t, trs)
}

// regDriftCheck checks one snapshot of r against the generation seen last
// (lastGen) and returns the snapshot's generation; it reports to faults, as
// it runs beside the callers.
func regDriftCheck(r *rig, faults *regFaults, lastGen uint64) uint64 {
	c := r.B.Counts()
	if c.Generation < lastGen {
		faults.add("generation went back from %d to %d", lastGen, c.Generation)
	}
	if c.Failures > c.Calls || c.Calls > 20 || c.SlowCalls != 0 || c.SlowFailures != 0 {
		faults.add("torn counts %+v", c)
	}
	if c.State != core.Closed && (c.Calls != 0 || c.ConsecutiveFailures != 0) {
		faults.add("closed-state counts outside closed: %+v", c)
	}
	if c.ProbesInFlight > 1 || c.ProbeSuccesses != 0 || (c.State != core.HalfOpen && c.ProbesInFlight != 0) {
		faults.add("probe counts %+v", c)
	}
	// Open must always come with a deadline in (now, openedAt+open]
	// rounded up to the millisecond: never "open but no deadline".
	p, err := r.B.Allow()
	switch {
	case err == nil:
		r.B.Record(p, core.Ignored) // give any probe slot straight back
	case errors.Is(err, core.ErrOpen):
		if p.RetryAfter <= 0 || p.RetryAfter >= regDriftOpen+time.Millisecond {
			faults.add("open with wait %v", p.RetryAfter)
		}
	case errors.Is(err, core.ErrHalfOpenFull):
	default:
		faults.add("Allow: unexpected error %v", err)
	}
	return c.Generation
}

// regDriftAfterwards checks, on a frozen clock set to a whole millisecond,
// that the stressed breaker r still trips, probes and closes exactly.
func regDriftAfterwards(t *testing.T, r *rig) {
	now := r.Clock.Now()
	r.Clock.Set((now/time.Millisecond + 1) * time.Millisecond)
	for i := 0; r.B.Counts().State != core.Open; i++ {
		require.Less(t, i, 21, "closed or half-open breaker failed to trip")
		require.True(t, r.Try(F))
	}
	r.Clock.Advance(2 * regDriftOpen) // past any deadline
	r.X(S)
	r.Is(core.Closed)
	r.Cnt(0, 0, 0, 0)
	base := len(r.CBs())
	for round := range 2 {
		admitted := 0
		for i := 1; i <= 20; i++ {
			if r.Try(F) {
				admitted++
			}
			if i < 10 {
				r.Is(core.Closed)
			}
		}
		require.Equal(t, 10, admitted, "round %d: trips at the 10th failure (min=10)", round)
		r.Is(core.Open)
		r.Clock.Advance(regDriftOpen - time.Microsecond)
		r.Reject(core.ErrOpen)
		r.Clock.Advance(time.Microsecond)
		r.X(S)
		r.Is(core.Closed)
	}
	tail := r.CBs()[base:]
	require.Len(t, tail, 6)
	for i, want := range []string{"C>O", "O>H", "H>C", "C>O", "O>H", "H>C"} {
		require.True(t, strings.HasPrefix(tail[i], want+"@"), "notification %d: %s", i, tail[i])
	}
}

// B29. denoland/std PR #7097: the open timestamp was the time the failing
// call started, so a slow call opened the breaker with its cooldown partly
// spent; and concurrent half-open failures each fired the open callbacks.
func TestRegression_OpenDeadlineFromCommitAndSingleReopen(t *testing.T) {
	cfg := core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 2,
		OpenDuration: 10 * time.Second, PermittedCallsInHalfOpen: 2}
	forEachImpl(t, func(t *testing.T, mk maker) {
		for round := range rounds(10_000, 300) {
			r := mk.build(t, cfg)
			p1 := r.A() // a slow call starts at 0
			r.At(1).X(F)
			r.Cnt(1, 1, 0, 0)
			r.Is(core.Closed)
			r.At(9).D(p1, F) // trips at 9, not at the call's start
			r.Is(core.Open)
			r.At(10).Reject(core.ErrOpen)
			regMs(r, 18_999).Reject(core.ErrOpen)
			r.At(19)
			pA := r.A()
			r.Is(core.HalfOpen)
			pB := r.A()
			ps := []core.Permit{pA, pB}
			parallel(2, func(i int) { r.D(ps[i], F) })
			r.Is(core.Open)
			require.Equal(t, []string{"C>O@9", "O>H@19", "H>O@19"}, r.CBs(), "round %d", round)
			regMs(r, 28_999).Reject(core.ErrOpen)
			r.At(29).A()
		}
	})
}
