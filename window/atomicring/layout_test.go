package atomicring

import (
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
// at the start of the Ring (64-bit aligned there on every platform), so the
// geometry after it never shares the line a CAS invalidates.
func TestLayout_HotLine(t *testing.T) {
	if unsafe.Sizeof(hot{}) != 64 || unsafe.Offsetof(Ring{}.hot) != 0 || unsafe.Offsetof(hot{}.a) != 0 {
		t.Fatalf("hot is %d bytes at offset %d, a at %d; want 64 at 0, a at 0",
			unsafe.Sizeof(hot{}), unsafe.Offsetof(Ring{}.hot), unsafe.Offsetof(hot{}.a))
	}
}
