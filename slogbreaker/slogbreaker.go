// Package slogbreaker logs circuit-breaker transitions with log/slog: set
// core.Config.OnStateChange to Listener(logger) and every committed
// transition is logged once, as one record with structured attributes.
package slogbreaker

import (
	"context"
	"log/slog"

	"github.com/casbreaker/casbreaker/core"
)

// Options tunes Listener. The zero value logs at the default levels with
// the default message.
type Options struct {
	// Message is each record's message. Zero: "circuit breaker transition".
	Message string
	// Level picks a record's level. Zero: DefaultLevel.
	Level func(core.Transition) slog.Level
}

// DefaultLevel is slog.LevelWarn for a transition into Open or ForcedOpen
// (calls will be refused) and for a trip that a cap on open breakers
// refused (core.ReasonCapped: the dependency failed enough to open, and
// calls still go to it), and slog.LevelInfo for every other, a
// reconfiguration (core.ReasonReconfigured, which changes no state)
// included.
func DefaultLevel(t core.Transition) slog.Level {
	if t.Reason == core.ReasonReconfigured {
		return slog.LevelInfo
	}
	if t.To == core.Open || t.To == core.ForcedOpen || t.Reason == core.ReasonCapped {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// Listener returns a core.Config.OnStateChange that logs each transition
// to logger (slog.Default() if nil), once, with the attributes
//
//	breaker     Transition.Name
//	from, to    the states, as their String
//	reason      Transition.Reason, as its String
//	generation  Transition.Generation
//	open_for    for a transition into Open: how long until a call may probe
//	open_until  the same as a wall-clock time, when the breaker's clock
//	            tells one (Transition.Time is set)
//	changed     for a reconfiguration: Transition.Changed, the fields
//
// The record's time is Transition.Time: the wall-clock time of the
// transition, not of the logging, so lines from several breakers compare;
// on a clock without wall time (core.ManualClock) it is zero, which
// slog's built-in handlers leave out. Like every listener it runs on the
// goroutine of a call to the breaker, outside every critical section; a
// record the handler is not enabled for costs no attribute. It is safe for
// concurrent use if logger's handler is, as slog's are.
func Listener(logger *slog.Logger, o Options) func(core.Transition) {
	if logger == nil {
		logger = slog.Default()
	}
	msg := o.Message
	if msg == "" {
		msg = "circuit breaker transition"
	}
	level := o.Level
	if level == nil {
		level = DefaultLevel
	}
	return func(t core.Transition) {
		ctx := context.Background()
		lv := level(t)
		h := logger.Handler()
		if !h.Enabled(ctx, lv) {
			return
		}
		r := slog.NewRecord(t.Time, lv, msg, 0)
		r.AddAttrs(
			slog.String("breaker", t.Name),
			slog.String("from", t.From.String()),
			slog.String("to", t.To.String()),
			slog.String("reason", t.Reason.String()),
			slog.Uint64("generation", t.Generation),
		)
		if t.Reason == core.ReasonReconfigured {
			r.AddAttrs(slog.String("changed", t.Changed))
		} else if t.To == core.Open {
			openFor := t.OpenUntil - t.At
			r.AddAttrs(slog.Duration("open_for", openFor))
			if !t.Time.IsZero() {
				r.AddAttrs(slog.Time("open_until", t.Time.Add(openFor)))
			}
		}
		_ = h.Handle(ctx, r) // a handler's write error has nowhere better to go
	}
}
