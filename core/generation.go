package core

// ofWord reports whether breaker generation gen is the generation of word
// w, which the caller loaded before this call: the word's field holds gen's
// low 20 bits and gen is in [base, base+2^20) for base as it is now. If the
// word's generation is still current, base (loaded after it) trails it by
// the lag, so a current gen passes; a gen k*2^20 older (k >= 1) is below
// base, and one k*2^20 newer is 2^20 or more above it, so neither does
// (docs/design.md). A caller that acts on the answer does so with a swap on
// w, which fails if the word moved.
func (b *Breaker) ofWord(w stateWord, gen uint64) bool {
	return w.genField() == gen&genMask && gen-b.base.Load() < genSpan
}

// closedOf reports whether word w, which the caller loaded, is closed with
// no run of failures (closedNoRun) and of breaker generation gen (ofWord):
// the fast paths' one test. closedNoRun's comparison of the low 20 bits
// is ofWord's first, so only ofWord's bound on base is added.
func (b *Breaker) closedOf(w stateWord, gen uint64) bool {
	// Both tests are zero when they pass, so one test of their OR decides;
	// with && the compiler materializes a bool and tests it again.
	return uint64((w^stateWord(gen<<genShift))&noRunMask)|(gen-b.base.Load())>>genBits == 0
}

// genOf is the breaker generation of word w, which the caller loaded before
// this call and will swap: exact whenever that swap succeeds, because the
// word, and so base's bound on it, did not move in between.
func (b *Breaker) genOf(w stateWord) uint64 { return fullGen(b.base.Load(), w) }

// current reports whether gen is the generation of a counting breaker
// (closed or metrics-only) now. The windows compare only the low bits of
// generations and ask this when their own arithmetic says an outcome is
// stale.
func (b *Breaker) current(gen uint64) bool {
	w := b.load()
	if w == moving {
		return b.successor().current(gen)
	}
	return w.counting() && b.ofWord(w, gen)
}

// committed does what follows every committed transition to generation gen
// before it is announced, and before any user code (listener, clock) can
// run on the committing goroutine: raise base once it trails gen by 2^16
// (so that it trails the current generation by less than 2^20: state.go),
// count the transition, and advance the count ring to gen, so that the
// ring's 16-bit generation never falls 2^16 behind the word's and a window
// from 65,536 transitions ago cannot pass for the new closed period's, or
// report gen to the time buckets, whose sweep (every 2^22 generations)
// keeps a bucket from 2^24 transitions ago from passing for one of gen's.
func (b *Breaker) committed(from, to State, gen uint64) {
	if d := gen - b.base.Load(); d >= baseStep && d < 1<<63 {
		b.raiseBase(gen)
	}
	if b.metrics != nil {
		b.metrics.transitions[from][to].Inc()
	}
	switch {
	case b.ring != nil:
		b.ring.Advance(uint32(gen))
	case b.buckets != nil:
		b.buckets.Advance(uint32(gen))
	}
}

// raiseBase moves base forward to gen, a generation this goroutine
// committed, unless another committer moved it there or further already.
// base only ever moves forward ("further" is serial arithmetic on 64 bits,
// exact because every value it compares is within 2^20 of the current
// generation).
func (b *Breaker) raiseBase(gen uint64) {
	for {
		old := b.base.Load()
		if d := gen - old; d == 0 || d >= 1<<63 || b.base.CompareAndSwap(old, gen) {
			return
		}
	}
}
