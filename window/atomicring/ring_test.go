package atomicring_test

import (
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
