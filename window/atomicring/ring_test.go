package atomicring_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/window"
	"github.com/casbreaker/casbreaker/window/atomicring"
)

func TestNewRejectsSizesOutsideTheRange(t *testing.T) {
	for _, size := range []int{-1, 0, atomicring.MaxSize + 1} {
		r, err := atomicring.New(size)
		require.ErrorIs(t, err, atomicring.ErrSize, "size %d", size)
		require.Nil(t, r)
	}
	r, err := atomicring.New(atomicring.MaxSize)
	require.NoError(t, err)
	require.Equal(t, atomicring.MaxSize, r.Size())
}

func TestZeroRingRecordPanicsNamingNew(t *testing.T) {
	var r atomicring.Ring
	require.Equal(t, window.Counts{}, r.Snapshot(0))
	require.Zero(t, r.Size())
	require.PanicsWithValue(t, "atomicring: Ring used without New: make one with atomicring.New", func() {
		r.Record(0, true, false)
	})
}

// The generation rule of the Ring's doc: a newer generation empties the
// window, an older one is stale, one 2^16 apart is the same, and 2^15
// ahead is older.
func TestGenerationsAsDocumented(t *testing.T) {
	r, err := atomicring.New(3)
	require.NoError(t, err)
	c, ok := r.Record(7, true, false)
	require.True(t, ok)
	require.Equal(t, window.Counts{Calls: 1, Failures: 1}, c)
	_, ok = r.Record(7+1<<15, true, false)
	require.False(t, ok, "2^15 ahead is older")
	c, ok = r.Record(7+1<<16, false, true)
	require.True(t, ok, "2^16 apart is the same generation")
	require.Equal(t, window.Counts{Calls: 2, Failures: 1, SlowCalls: 1}, c)
	c, ok = r.Record(7+1<<15-1, false, false)
	require.True(t, ok)
	require.Equal(t, window.Counts{Calls: 1}, c, "a newer generation empties the window first")
	require.Equal(t, window.Counts{}, r.Snapshot(7), "an older generation's window is gone")
	_, ok = r.Record(7, true, true)
	require.False(t, ok, "an older generation is stale")
	require.Equal(t, window.Counts{Calls: 1}, r.Snapshot(7+1<<15-1+1<<16))
}

// Concurrent Records lose and tear nothing: the window ends full of the
// last W outcomes, and each Record's counts include its own outcome. Run
// it under -race.
func TestConcurrentRecordsAsDocumented(t *testing.T) {
	const size, workers, each = 50, 8, 500
	r, err := atomicring.New(size)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				c, ok := r.Record(1, true, true)
				if !ok || c.Calls == 0 || c.Failures != c.Calls || c.SlowFailures != c.Calls || c.Calls > size {
					t.Errorf("Record returned %+v, %v", c, ok)
					return
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, window.Counts{Calls: size, Failures: size, SlowCalls: size, SlowFailures: size}, r.Snapshot(1))
	require.Zero(t, testing.AllocsPerRun(100, func() { r.Record(1, false, false) }))
}
