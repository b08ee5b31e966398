package fuzz_test

// input reads a fuzz input as a stream of small decisions. Past the end it
// reads zeros, so every input, however short, decodes to something.
type input struct {
	b []byte
	i int
}

func (r *input) more() bool { return r.i < len(r.b) }

func (r *input) byte() byte {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

// intn is a number in 0..n-1.
func (r *input) intn(n int) int { return int(r.byte()) % n }

// u16 reads two bytes, little-endian.
func (r *input) u16() uint16 { return uint16(r.byte()) | uint16(r.byte())<<8 }

// u32 reads four bytes, little-endian.
func (r *input) u32() uint32 { return uint32(r.u16()) | uint32(r.u16())<<16 }
