package fuzz_test

import "github.com/casbreaker/casbreaker/core"

// enc builds a FuzzDifferential input: config bytes, then
// one method per operation, each appending the bytes runDifferential reads
// for it.
type enc []byte

func (e enc) allow() enc                       { return append(e, opAllow) }
func (e enc) allows(n int) enc                 { return append(e, make([]byte, n)...) } // n Allows
func (e enc) call(o core.Outcome) enc          { return append(e, opCall, byte(o)) }
func (e enc) record(i int, o core.Outcome) enc { return append(e, opRecord, byte(i), byte(o)) }
func (e enc) done(i, err int) enc              { return append(e, opDone, byte(i), byte(err)) }
func (e enc) state() enc                       { return append(e, opState) }
func (e enc) step(kind, arg byte) enc          { return append(e, opClock, arg, kind) }
func (e enc) forceOpen(kind, arg byte) enc     { return append(e, opForceOpen, kind, arg) }
func (e enc) disable() enc                     { return append(e, opManual, 0) }
func (e enc) metricsOnly() enc                 { return append(e, opManual, 1) }
func (e enc) reset() enc                       { return append(e, opManual, 2) }
func (e enc) restart(flags, arg byte) enc      { return append(e, opManual, 4, flags, arg) } // needs restarts on

// reconfigure is a Reconfigure to difftest.Alternatives(config)[alt]; it
// needs restarts and reconfigurations on (cfgReconfigure).
func (e enc) reconfigure(alt byte) enc { return append(e, opManual, 5, alt) }

// hint is RecordHint of held permit i with hint kind k (hintDuration).
func (e enc) hint(i int, k, arg byte) enc { return append(e, opRecordHint, byte(i), k, arg) }

// forgedHint is RecordHint of a hand-built permit of generation
// current+g-2.
func (e enc) forgedHint(g, k, arg byte) enc { return append(e, opForgedHint, g, k, arg) }

// hinted is the bytes of hintedErr: form, doneErrs index, hint kind and
// argument (and for the nested form 3 the outer hint's).
func hinted(form, base, k, arg byte, outer ...byte) []byte {
	return append([]byte{form, base, k, arg}, outer...)
}

func (e enc) doneHint(i int, err []byte) enc { return append(append(e, opDoneHint, byte(i)), err...) }
func (e enc) doHint(err []byte) enc          { return append(append(e, opCallHint, 0), err...) }
func (e enc) callHint(err []byte) enc        { return append(append(e, opCallHint, 1), err...) }

// Hint kinds (hintDuration) and ForceOpen kinds (forceOpenDuration).
const (
	hintZero, hintNeg, hintNegIdle, hintNano, hintMillis, hintMax, hintPastMax, hintHuge, hintAroundOpen              = 0, 1, 2, 3, 4, 5, 6, 7, 8
	forceZero, forceNano, forceMillis, forceOpenDur, forceNeg, forceNegIdle, forceLimit, forcePastLimit, forceExtreme = 0, 2, 3, 4, 5, 6, 7, 8, 9
)

// Indexes in doneErrs.
const errNil, errFailIdx = 0, 1

// The configs of the seeds (decodeConfig).
var (
	// Count window of 4, one failure in a row trips, 70 ms open, one
	// probe; ramp-up 200 ms from 0 %; metrics on; the listener reads back.
	cfgRamp = enc{0x00, 3, 0x90, 4, 0, 9, 0, 1, 1, 0x02, 14, 0}
	// Time window of 3 s, slow above 217 ms, one failure in a row trips,
	// 147.333 ms open, two probes, one success closes; ramp-up 750 ms from
	// 50 %.
	cfgRampSlow = enc{0x01, 2, 0x18, 30, 0, 0, 20, 1, 2, 1, 0x02, 58, 50}
	// Count window of 4, one failure in a row trips, 70 ms open, one
	// probe; max wait 11 ms.
	cfgMaxWait = enc{0x00, 3, 0x10, 4, 0, 9, 0, 1, 1, 0x01, 40}
	// No window, one failure trips, 28 ms open, three probes, two
	// successes close; max wait 3.25 s (units of 4 ms).
	cfgMaxWaitLong = enc{0x02, 0x10, 0, 3, 0, 3, 2, 0x01, 51}
	// Count window of 4, one failure in a row trips, 70 ms open, one
	// probe though three successes close.
	cfgOneProbe = enc{0x00, 3, 0x10, 4, 0, 9, 0, 1, 3, 0x00}
	// Count window of 8 at 50 % after 8 calls, 70 ms open, one probe;
	// hints bounded by 2 s.
	cfgHints = enc{0x00, 7, 0x00, 8, 9, 0, 1, 1, 0x04, 158}
	// Count window of 4, one failure in a row trips, 70 ms open, one
	// probe; hints bounded by 2 s; metrics on.
	cfgManual = enc{0x00, 3, 0x10, 4, 0, 9, 0, 1, 1, 0x04, 158}
	// Everything: time window of 4 s, failure count 3 and rate 61 % after
	// one call, backoff, the custom classifier, the listener reading back,
	// two probes; max wait 11 ms, ramp-up 500 ms from 40 %, hints bounded
	// by 2 s, metrics on.
	cfgAll = enc{0x01, 3, 0xe3, 60, 2, 1, 9, 2, 9, 0, 2, 1, 0x07, 40, 38, 40, 158}
	// cfgManual's breaker with its open duration from a function
	// (difftest.OpenDuration seeded 7, bounded by 280 ms) and a jitter of
	// 200/255.
	cfgOpenDur = enc{0x00, 3, 0x10, 4, 0, 9, 0, 1, 1, 0x84, 158, 3, 3, 7, 200}
	// Time window of 1 s in buckets of 100 ms (decodeMoreFeatures' width
	// bits), two failures trip after one call, 70 ms open, one probe;
	// metrics on.
	cfgNarrow = enc{0x01, 0, 0x02, 1, 1, 9, 0, 1, 1, 0x80, 0x08}
)

// Count window of 4, one failure in a row trips, 70 ms open, one
// probe; an open gate that refuses half the trips; metrics on.
var cfgCapped = enc{0x00, 3, 0x10, 4, 0, 9, 0, 1, 1, 0x40}

// cfgCapped's breaker without the gate, with restarts among the
// operations (decodeMoreFeatures' bit 32).
var cfgRestarts = enc{0x00, 3, 0x10, 4, 0, 9, 0, 1, 1, 0x80, 0x20}

// cfgCapped's breaker without the open gate, with a probe gate that
// refuses half the probes (decodeMoreFeatures' bit 64), seeded by 7.
var cfgProbeGate = enc{0x00, 3, 0x10, 4, 0, 9, 0, 1, 1, 0x80, 0x40, 7}

// cfgRestarts' breaker with reconfigurations among the operations too
// (decodeMoreFeatures' bit 128).
var cfgReconfigure = enc{0x00, 3, 0x10, 4, 0, 9, 0, 1, 1, 0x80, 0xa0}

// Index in doneErrs of the error on which the open-duration function panics.
const errDurationPanics = 8

func with(cfg enc) enc { return append(enc(nil), cfg...) }

// differentialSeeds are FuzzDifferential's seeds: seven small histories of
// the plain rules (trips, probes, backoff, time windows, slow calls, the
// custom classifier), then inputs that reach each manual control, the
// ramp-up, the max wait and the hints (TestDifferentialSeedsReach checks
// that they do).
var differentialSeeds = [][]byte{
	{},
	{0, 1, 4, 0, 1, 10, 0, 0, 0, 0, 8, 1, 0, 1, 0, 1, 0, 5, 200, 0, 0, 1, 0},
	{0, 33, 3, 50, 2, 20, 2, 3, 2, 4, 0, 8, 1, 1, 0, 1, 1, 0, 1, 1, 5, 40, 0, 0, 0, 3, 1, 0, 2, 1, 0},
	{1, 3, 5, 30, 2, 2, 12, 0, 3, 2, 0, 8, 2, 1, 5, 100, 0, 2, 1, 0, 2, 1, 5, 255, 0, 4, 0, 0, 0},
	{2, 80, 2, 1, 3, 3, 0, 8, 1, 0, 1, 1, 6, 0, 1, 5, 3, 0, 0, 0, 1, 9, 0, 0, 0, 0, 2},
	{0, 141, 6, 60, 1, 90, 20, 3, 40, 2, 2, 2, 8, 0, 0, 5, 2, 0, 1, 0, 1, 0, 1, 0, 0, 5, 7, 0, 0, 0, 1},
	{1, 255, 3, 40, 2, 50, 60, 4, 2, 100, 8, 1, 0, 1, 4, 4, 0, 0, 0, 0, 1, 0, 5, 90, 0, 1, 0, 0, 3, 6, 0},

	// Buckets of 100 ms: a failure at 0.95 s has left the 1 s window at
	// 1.95 s (with buckets of 1 s it would still count), the next one
	// alone does not trip; two in the window at 2 s do.
	with(cfgNarrow).step(stepTens, 95).call(core.Failure).step(stepTens, 100).call(core.Failure).state().
		step(stepTens, 5).call(core.Failure).state(),

	// The probe limit: of two calls in half-open only the first is a
	// probe (PermittedCallsInHalfOpen binds before SuccessesToClose).
	with(cfgOneProbe).call(core.Failure).step(stepOpen, 0).allows(2).state(),
	// Ramp-up: trip, probe, close; shed at the instant of closing, then
	// through the ramp's shares; a nanosecond before its end and at it;
	// then a success and a trip from closed.
	with(cfgRamp).call(core.Failure).step(stepOpen, 0).call(core.Success).allows(3).
		step(stepInRamp, 5).allows(2).step(stepInRamp, 90).allows(2).step(stepInRamp, 200).allows(3).
		step(stepRampEndLess, 0).allow().step(stepRampEnd, 0).allow().
		call(core.Success).call(core.Failure).state(),
	// Ramp-up from 50 % on a time window with slow calls: calls through
	// the ramp, a slow success counted in the metrics, a trip inside the
	// ramp, and the next close starting a new ramp.
	with(cfgRampSlow).call(core.Failure).allow().step(stepWait, 0).allow().record(0, core.Success).
		allows(4).step(stepInRamp, 0).allows(3).step(stepMillis, 250).record(0, core.Success).record(0, core.Success).
		record(0, core.Success).step(stepInRamp, 77).allows(2).call(core.Failure).allow().step(stepWait, 0).
		call(core.Success).allows(2).step(stepRampEnd, 0).allow().step(stepMillis, 250).record(0, core.Success),
	// Half-open max wait: the probe is lost; a nanosecond before the max
	// wait the breaker still refuses, at it a new generation starts; the
	// lost probe's success is then stale, the new probe's closes.
	with(cfgMaxWait).call(core.Failure).step(stepOpen, 0).allows(2).step(stepExpiryLess, 0).allow().
		step(stepExpiry, 0).allow().record(0, core.Success).state().record(0, core.Success).state(),
	// Max wait with three probes, two successes to close, a max wait of
	// units of 4 ms; the restart, then the close.
	with(cfgMaxWaitLong).call(core.Failure).step(stepOpen, 0).allows(2).record(0, core.Success).allows(2).
		step(stepExpiryLess, 0).allow().step(stepExpiry, 0).allows(3).call(core.Success).call(core.Success).state(),
	// Retry-after hints bounded by 2 s on a 70 ms open duration: a hint of
	// 100 ms trips a closed breaker at once; a huge hint re-opens the probe
	// for the bound; hinted Dones with zero and negative hints are plain
	// failures, a joined one re-opens; in metrics-only a hinted Do, a
	// hinted RecordHint and a hinted hand-built permit "would have
	// opened", zero and negative ones count as failures; hints at and past
	// the bound and around the open duration; hints on stale permits.
	with(cfgHints).allow().hint(0, hintMillis, 100).allow().step(stepWait, 0).allow().hint(0, hintHuge, 0).
		allow().step(stepWait, 0).allow().doneHint(0, hinted(0, errFailIdx, hintZero, 0)).
		allow().step(stepWait, 0).allow().doneHint(0, hinted(1, errFailIdx, hintNeg, 0)).
		allow().step(stepWait, 0).allow().doneHint(0, hinted(2, errFailIdx, hintMillis, 200)).
		metricsOnly().doHint(hinted(0, errFailIdx, hintMillis, 30)).
		allow().hint(0, hintZero, 0).allow().hint(0, hintNegIdle, 3).forgedHint(2, hintMillis, 50).
		callHint(hinted(3, errFailIdx, hintZero, 0, hintAroundOpen, 3)).
		allow().forgedHint(1, hintMillis, 50).reset().allow().hint(0, hintPastMax, 0).
		allow().step(stepWait, 0).allow().hint(0, hintAroundOpen, 200).allow().step(stepWait, 0).
		allow().doneHint(0, hinted(3, errFailIdx, hintNano, 0, hintMax, 0)).allow().step(stepRetry, 0).
		allow().call(core.Success).allow().hint(0, hintNano, 0).allow().reset().hint(0, hintMillis, 9),
	// The manual controls: forced open rejects, disabled admits and drops
	// outcomes and hints, metrics-only counts and "would have opened",
	// ForceOpen with invalid durations changes nothing, ForceOpen of a year
	// and of 50 ms, Reset, the probe after a ForceOpen(d), hints in
	// forced-open and disabled, a control from half-open.
	with(cfgManual).forceOpen(forceZero, 0).allow().disable().call(core.Failure).call(core.Success).
		allow().hint(0, hintMillis, 100).allow().done(0, errFailIdx).
		metricsOnly().call(core.Success).call(core.Failure).call(core.Failure).
		forceOpen(forceNeg, 0).forceOpen(forceNegIdle, 3).forceOpen(forcePastLimit, 0).
		forceOpen(forceExtreme, 0).forceOpen(forceExtreme, 1).forceOpen(forceLimit, 0).allow().
		step(stepIdle, 9).reset().call(core.Failure).forceOpen(forceMillis, 50).allow().step(stepWait, 0).
		allow().forceOpen(forceNano, 0).allow().forceOpen(forceOpenDur, 0).allow().step(stepWait, 0).
		allow().metricsOnly().record(0, core.Success).forceOpen(forceZero, 0).forgedHint(2, hintMillis, 9).
		reset().allow().forceOpen(forceZero, 0).hint(0, hintMillis, 9).state(),
	// The open-duration function and the jitter: a trip whose function
	// panics (committed all the same), re-opens by a failure and by a
	// hint, a close, a trip through Record, ForceOpen lengthened by the
	// jitter and a re-open after it.
	with(cfgOpenDur).allow().done(0, errDurationPanics).step(stepWait, 0).allow().done(0, errFailIdx).
		step(stepWait, 0).allow().hint(0, hintMillis, 100).step(stepWait, 0).allow().done(0, errNil).
		call(core.Failure).step(stepWait, 0).allow().done(0, errNil).forceOpen(forceMillis, 50).allow().
		step(stepWait, 0).allow().record(0, core.Failure).state(),
	// Everything at once on a time window.
	with(cfgAll).call(core.Failure).call(core.Failure).call(core.Failure).allow().step(stepWait, 0).
		allows(3).step(stepExpiry, 0).allow().hint(1, hintMillis, 20).allow().step(stepWait, 0).allow().
		done(0, errNil).allows(3).step(stepInRamp, 9).allows(2).done(0, 6).step(stepRampEnd, 0).allow().
		metricsOnly().callHint(hinted(1, errFailIdx, hintMillis, 90)).forceOpen(forceZero, 0).disable().
		allow().record(0, core.Failure).reset().allow(),
	// The cap on open breakers: trips refused (closed -> closed, capped)
	// and let through, the probe that closes gives the slot back, and
	// ForceOpen, Disable and Reset take and give it back unasked.
	with(cfgCapped).call(core.Failure).call(core.Failure).call(core.Failure).call(core.Failure).
		step(stepOpen, 0).call(core.Success).call(core.Failure).call(core.Failure).call(core.Failure).
		forceOpen(forceZero, 0).disable().call(core.Failure).reset().call(core.Failure).call(core.Failure).
		forceOpen(forceMillis, 50).allow().step(stepWait, 0).allow().record(0, core.Success).state(),
	// Restarts: closed with a call in the window (carried), open with time
	// left after 20 ms of downtime, and again with a wall clock that went
	// back 5 ms; then the probe and a restart of the half-open breaker.
	with(cfgRestarts).call(core.Success).restart(4, 0).call(core.Failure).restart(1, 20).allow().
		restart(3, 5).allow().step(stepWait, 0).allow().restart(0, 0).allow().call(core.Success).state(),
	// A probe gate: after the trip, probes asked for until one is let go
	// and one refused, a refused one's wait waited out, then the verdict.
	with(cfgProbeGate).call(core.Failure).step(stepOpen, 0).allow().allow().step(stepWait, 0).allow().
		record(0, core.Success).allow().step(stepWait, 0).allow().allow().record(0, core.Failure).state(),
	// Reconfigurations (difftest.Alternatives): closed with calls in the
	// window (grown, then shrunk), open (the deadline kept), half-open
	// with a probe out (more probes, then one: the kept success closes at
	// once), an invalid one refused, and a restart after them.
	with(cfgReconfigure).call(core.Success).call(core.Success).reconfigure(3).reconfigure(4).
		call(core.Failure).reconfigure(15).allow().step(stepWait, 0).allow().reconfigure(8).allow().
		record(0, core.Success).record(0, core.Success).reconfigure(7).reconfigure(18).restart(0, 0).
		call(core.Failure).state(),
}
