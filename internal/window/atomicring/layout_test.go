package atomicring

import (
	"runtime"
	"testing"
	"unsafe"
)

// state is A unpacked, field by field: the layout as the comment beside the
// constants in ring.go draws it, written out plainly so that tests can build
// and read words without the ring's word arithmetic.
type state struct {
	pend                  uint64
	sf, s, f, n, pos, lap uint64
	closed                bool
	gen                   uint16
}

func (r *Ring) unpack(a uint64) state {
	return state{
		pend:   a & pendMask,
		sf:     a >> sfShift & r.field,
		s:      a >> r.sShift & r.field,
		f:      a >> r.fShift & r.field,
		n:      a >> r.nShift & r.field,
		pos:    a >> r.posShift & r.field,
		lap:    a >> r.lapShift & r.lapMask,
		closed: a&closedBit != 0,
		gen:    uint16(a >> genShift),
	}
}

func (r *Ring) pack(w state) uint64 {
	var closed uint64
	if w.closed {
		closed = closedBit
	}
	return closed | w.pend |
		w.sf<<sfShift |
		w.s<<r.sShift |
		w.f<<r.fShift |
		w.n<<r.nShift |
		w.pos<<r.posShift |
		(w.lap&r.lapMask)<<r.lapShift |
		uint64(w.gen)<<genShift
}

// A and the two words RecordFastSuccess reads beside it fill one cache line
// at the start of the Ring, and a Ring is a whole number of lines, so every
// Ring New returns starts on a line (with a 224-byte Ring about half of
// them would be off a line): the geometry after hot,
// and whatever the allocator puts next, never share the line a CAS
// invalidates.
func TestLayout_HotLine(t *testing.T) {
	if unsafe.Sizeof(hot{}) != cacheLine || unsafe.Offsetof(Ring{}.hot) != 0 || unsafe.Offsetof(hot{}.a) != 0 ||
		unsafe.Sizeof(Ring{})%cacheLine != 0 {
		t.Fatalf("hot is %d bytes at offset %d, a at %d, Ring %d bytes; want %d at 0, a at 0, Ring a multiple of %[5]d",
			unsafe.Sizeof(hot{}), unsafe.Offsetof(Ring{}.hot), unsafe.Offsetof(hot{}.a), unsafe.Sizeof(Ring{}), cacheLine)
	}
	if unsafe.Sizeof(uintptr(0)) < 8 {
		// 32-bit platforms get no such placement from the allocator; the
		// 386 run is there for the atomics' alignment, not for lines.
		return
	}
	var keep []*Ring
	for i := range 64 {
		r := mustNew(t, 1+i%MaxSize)
		keep = append(keep, r)
		if a := uintptr(unsafe.Pointer(&r.hot)); a%cacheLine != 0 {
			t.Fatalf("Ring %d (W=%d) at %#x: hot is off a %d-byte line", i, r.Size(), a, cacheLine)
		}
	}
	runtime.KeepAlive(keep) // every object stays allocated, so none is placed where another was
}
