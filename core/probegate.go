package core

import "time"

// ProbeGate decides whether a half-open probe that the breaker admitted
// goes out: the hook for a probe budget shared beyond one breaker, such as
// a fleet of replicas that let P probes out across all of them per
// half-open period (the fleet module's lease). The breaker asks it about
// every probe permit before Allow returns it, and tells it the outcome of
// every probe permit it let go, so that the gate can give back whatever it
// granted.
//
// The breaker calls the gate only on half-open paths, never on the
// closed-state or open-state Allow, Done or Record: a breaker with a gate
// costs nothing more while it is closed or open. It calls it on the
// goroutine of the caller, with no lock of the breaker's held (the baseline
// releases its mutex first), so a gate may take time (a store call with a
// deadline) and may call into the breaker; its methods must be safe for
// concurrent use. Every probe permit the gate lets go is reported to it
// once per Done, Record or RecordHint of that permit (a caller that reports
// a permit twice reports it to the gate twice), stale or not; a permit it
// refused is never reported.
type ProbeGate interface {
	// AdmitProbe is asked, before Allow returns it, about the probe
	// permit p that the breaker admitted (p.Probe is true; its
	// open -> half-open or max-wait notification, if any, has been
	// delivered). It returns a nil refusal to let p go out. A non-nil
	// refusal refuses it: the breaker gives p's probe slot back with
	// nothing counted but the rejection (Metrics.Rejected for half-open
	// full), and Allow returns a zero Permit whose RetryAfter is wait (a
	// negative wait counts as zero, as a rejection's wait is never
	// negative) and the refusal as it is; a nil refusal's wait is not
	// read. The refusal should match ErrRejected and
	// ErrHalfOpenFull with errors.Is (and carry wait for RetryAfterOf), so
	// that Do and the integrations treat it as a full half-open breaker;
	// the breaker's own RetryAfter does not know the gate's wait and
	// reports the breaker's. If AdmitProbe panics, the slot is given back
	// and the panic goes on out of Allow.
	AdmitProbe(p Permit) (wait time.Duration, refusal error)
	// ProbeDone is told the outcome o of the probe permit p that AdmitProbe
	// let go (Ignored for a released one, Failure for a hinted failure),
	// after the breaker has recorded it and delivered any notification,
	// and also when a notification's listener panics (the panic then goes
	// on after ProbeDone returns).
	ProbeDone(p Permit, o Outcome)
}

// gateProbe asks Config.ProbeGate whether the probe permit p, which this
// Allow admitted (counted in Metrics only if there is no gate), goes out,
// and returns Allow's answer: p, or the gate's refusal with p's slot given
// back.
func (b *Breaker) gateProbe(p Permit) (Permit, error) {
	g := b.cfg.ProbeGate
	if g == nil {
		return p, nil
	}
	letGo := false
	defer func() {
		if !letGo {
			// Refused, or the gate panicked: give the slot back.
			b.settleProbe(p, Ignored, nil, false)
		}
	}()
	wait, refusal := g.AdmitProbe(p)
	if refusal == nil {
		letGo = true
		b.countAdmitted()
		return p, nil
	}
	if b.metrics != nil {
		b.metrics.rejected(rejectHalfOpenFull)
	}
	return Permit{RetryAfter: max(wait, 0)}, refusal
}
