package atomicring

// ADVERSARIAL FINDING (branch adv-windows), expected to FAIL: the hot line
// is 64 bytes at offset 0 of the Ring (TestLayout_HotLine), but nothing
// aligns a Ring to 64 bytes. A Ring is not a multiple of 64 bytes, so the
// allocator's size class places consecutive Rings at offsets that are not
// multiples of 64: hot then straddles two cache lines, A shares its line
// with the tail of the neighbouring object (another Ring's geometry or
// anything else in that size class), and for some offsets healthyMask and
// healthy fall on the line after A's, so RecordFastSuccess touches two
// lines. The "cache line of its own" claim in ring.go holds only by chance.

import (
	"testing"
	"unsafe"
)

func TestAdvLayout_HotIsCacheLineAligned(t *testing.T) {
	var keep []*Ring
	bad := 0
	for range 64 {
		r, err := New(100)
		if err != nil {
			t.Fatal(err)
		}
		keep = append(keep, r)
		if uintptr(unsafe.Pointer(&r.hot))%64 != 0 {
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d Rings (sizeof Ring = %d) have hot off a 64-byte boundary: A's line is shared with a neighbour",
			bad, len(keep), unsafe.Sizeof(Ring{}))
	}
}
