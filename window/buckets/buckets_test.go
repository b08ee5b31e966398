package buckets_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/window"
	"github.com/casbreaker/casbreaker/window/buckets"
)

func Example() {
	w, err := buckets.New(10) // the last 10 seconds
	if err != nil {
		panic(err)
	}
	const gen = 1 // the generation the calls were admitted under

	w.Record(gen, 0, true, false)                             // a failure in second 0
	w.Record(gen, 1500*time.Millisecond, false, true)         // a slow success in second 1
	w.Record(gen, 9*time.Second, false, false)                // second 9
	fmt.Printf("%+v\n", w.Snapshot(gen, 9*time.Second))       // seconds 0..9
	fmt.Printf("%+v\n", w.Snapshot(gen, 10*time.Second))      // seconds 1..10: the failure left
	fmt.Println(w.Record(gen-1, 10*time.Second, true, false)) // an older generation: stale
	// Output:
	// {Calls:3 Failures:1 SlowCalls:1 SlowFailures:0}
	// {Calls:2 Failures:0 SlowCalls:1 SlowFailures:0}
	// false
}

// A window of 1 s in buckets of 100 ms forgets a failure 100 ms after it
// leaves, where buckets of 1 s would hold it for up to a second more.
func ExampleNewWidth() {
	w, err := buckets.NewWidth(1, 100*time.Millisecond) // the last second, in tenths
	if err != nil {
		panic(err)
	}
	const gen = 1
	const ms = time.Millisecond

	w.Record(gen, 250*ms, true, false)                 // a failure in 200..300 ms
	w.Record(gen, 900*ms, false, false)                // a success in 900..1000 ms
	fmt.Printf("%+v\n", w.Snapshot(gen, 1199*ms))      // 200..1200 ms: both
	fmt.Printf("%+v\n", w.Snapshot(gen, 1200*ms))      // 300..1300 ms: the failure left
	_, err = buckets.NewWidth(1, 300*time.Millisecond) // does not divide 1 s
	fmt.Println(err)
	// Output:
	// {Calls:2 Failures:1 SlowCalls:0 SlowFailures:0}
	// {Calls:1 Failures:0 SlowCalls:0 SlowFailures:0}
	// buckets: bucket width must be a whole number of milliseconds from 100ms to 1s that divides 1s: got 300ms
}

func TestNewRejectsSizesOutsideTheRange(t *testing.T) {
	for _, seconds := range []int{-1, 0, buckets.MaxSeconds + 1} {
		w, err := buckets.New(seconds)
		require.ErrorIs(t, err, buckets.ErrSize, "seconds %d", seconds)
		require.Nil(t, w)
	}
	w, err := buckets.New(buckets.MaxSeconds)
	require.NoError(t, err)
	require.Equal(t, buckets.MaxSeconds, w.Seconds())
	require.Equal(t, time.Second, w.Width())

	w, err = buckets.NewWidth(buckets.MaxBuckets/10+1, buckets.MinWidth)
	require.ErrorIs(t, err, buckets.ErrSize, "361 s of 100 ms buckets")
	require.Nil(t, w)
	w, err = buckets.NewWidth(buckets.MaxBuckets/10, buckets.MinWidth)
	require.NoError(t, err)
	require.Equal(t, buckets.MaxBuckets/10, w.Seconds())
	require.Equal(t, buckets.MinWidth, w.Width())
	w, err = buckets.NewWidth(1, buckets.MinWidth-time.Millisecond)
	require.ErrorIs(t, err, buckets.ErrWidth)
	require.Nil(t, w)
}

func TestZeroWindowRecordPanicsNamingNew(t *testing.T) {
	var w buckets.Window
	require.Equal(t, window.Counts{}, w.Snapshot(0, time.Second))
	require.Zero(t, w.Seconds())
	require.Zero(t, w.Width())
	require.PanicsWithValue(t, "buckets: Window used without New: make one with buckets.New", func() {
		w.Record(0, time.Second, true, false)
	})
}

// Generations are tagged per bucket: a late outcome of an older generation
// never counts in a newer one's window, but it is dropped only where its
// second's bucket holds the newer one already; in a second the newer one
// has not written, it is kept under its own generation, which only a
// Snapshot of that generation counts.
func TestOlderGenerationNeverCountsInANewerWindow(t *testing.T) {
	w, err := buckets.New(3)
	require.NoError(t, err)
	require.True(t, w.Record(1, 0, true, false))
	require.False(t, w.Record(0, 500*time.Millisecond, true, false), "second 0 holds generation 1")
	require.True(t, w.Record(0, time.Second, true, false), "second 1 holds no generation yet")
	require.Equal(t, window.Counts{Calls: 1, Failures: 1}, w.Snapshot(1, time.Second))
	require.Equal(t, window.Counts{Calls: 1, Failures: 1}, w.Snapshot(0, time.Second), "kept under generation 0")
	require.True(t, w.Record(1, time.Second, false, false), "generation 1 takes second 1 over")
	require.Equal(t, window.Counts{Calls: 2, Failures: 1}, w.Snapshot(1, time.Second))
	require.Equal(t, window.Counts{}, w.Snapshot(0, time.Second))
}

// The Window's doc: a reading below zero counts as second 0, a generation
// 2^24 apart is the same, a clock that goes back never brings an evicted
// second back, and concurrent Records lose nothing (run it under -race)
// and allocate nothing.
func TestWindowAsDocumented(t *testing.T) {
	w, err := buckets.New(2)
	require.NoError(t, err)
	require.True(t, w.Record(3, -time.Hour, true, false))
	require.True(t, w.Record(3+1<<24, 999*time.Millisecond, false, true))
	require.Equal(t, window.Counts{Calls: 2, Failures: 1, SlowCalls: 1}, w.Snapshot(3, 0))
	require.Equal(t, window.Counts{}, w.Snapshot(3, 2*time.Second), "second 0 left the window")
	require.Equal(t, window.Counts{}, w.Snapshot(3, time.Second), "and a clock gone back does not bring it back")

	const workers, each = 8, 500
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for range each {
				if !w.Record(4, 10*time.Second, i%2 == 0, i%4 == 0) {
					t.Error("an outcome of the current second and generation was dropped")
					return
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, window.Counts{Calls: workers * each, Failures: workers / 2 * each, SlowCalls: workers / 4 * each, SlowFailures: workers / 4 * each},
		w.Snapshot(4, 10*time.Second))
	require.Zero(t, testing.AllocsPerRun(100, func() { w.Record(4, 10*time.Second, false, false) }))
}

// A caller that counts its generations up, as the breaker does, keeps
// recording however far they go: a bucket no outcome reached since New
// (an idle second) must not come to read as newer once the generations
// are 2^23 past it, and drop every outcome of its second from then on.
func TestGenerationsCountedUpPastHalfTheRangeKeepRecording(t *testing.T) {
	w, err := buckets.New(2)
	require.NoError(t, err)
	const step = 1 << 20
	for g := uint32(0); g <= 1<<24+1<<23; g += step {
		now := time.Duration(g/step) * 2 * time.Second // the even seconds only: one bucket stays idle
		require.True(t, w.Record(g, now, true, false), "generation %#x at %v", g, now)
	}
	g := uint32(1<<24 + 1<<23 + step)
	for _, now := range []time.Duration{100 * time.Second, 101 * time.Second} {
		require.True(t, w.Record(g, now, true, false), "generation %#x at %v: the idle bucket's second", g, now)
	}
	require.Equal(t, window.Counts{Calls: 2, Failures: 2}, w.Snapshot(g, 101*time.Second))
}
