package observe

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/casbreaker/casbreaker/core"
)

// Reader reads the breakers of a Source for one exporter: a
// prombreaker.Collector or an otelbreaker registration holds one. Make it
// with NewReader; the zero value reads nothing. Read may run concurrently
// with itself and with the breakers' calls.
type Reader struct {
	src  Source
	tr   *Transitions
	mark *readerMark // this reader's place among tr's readers
}

// NewReader returns a Reader of src. With tr non-nil the samples'
// Transitions come from it, by reason, and the Reader is one of tr's
// readers, which decide together when tr forgets a name (see
// Transitions): so one Transitions may serve several Readers over the
// same or other Sources. It returns an error matching
// core.ErrInvalidArgument if src is nil.
func NewReader(src Source, tr *Transitions) (*Reader, error) {
	if src == nil {
		return nil, fmt.Errorf("%w: observe.NewReader: the Source is nil (make one with observe.Breakers or observe.Registry)", core.ErrInvalidArgument)
	}
	r := &Reader{src: src, tr: tr}
	if tr != nil {
		r.mark = tr.join()
	}
	return r, nil
}

// DuplicateNamesError is the error of a read that found breakers sharing
// a name (a label value, see Sample.Name): the first of them, in the
// Source's order, was read, and the others were left out, since their
// series would be indistinguishable from its.
type DuplicateNamesError struct {
	// Skipped maps each shared name to the number of breakers left out
	// under it (1 for two breakers of one name).
	Skipped map[string]int
}

func (e *DuplicateNamesError) Error() string {
	names := make([]string, 0, len(e.Skipped))
	for name := range e.Skipped {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, name := range names {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "observe: %d breakers are named %q: give each its own core.Config.Name to tell them apart", e.Skipped[name]+1, name)
	}
	return b.String()
}

// Read calls fn with a Sample of each breaker of the Source, in its
// order, on the calling goroutine. Each breaker's figures are read one
// after another while calls go on, so a sample is not one instant
// (core.Metrics says what that allows); each figure on its own is what
// the breaker reported.
//
// Breakers that share a name cannot be told apart: fn sees the first
// only, and Read returns a *DuplicateNamesError that counts the others,
// by name, after reading every breaker; that is its only error. A nil r
// panics with a message that names NewReader.
func (r *Reader) Read(fn func(Sample)) error {
	if r == nil {
		panic("observe: Read on a nil *Reader: make one with observe.NewReader and check its error")
	}
	if r.src == nil {
		return nil
	}
	var read uint64
	if r.tr != nil {
		read = r.tr.begin()
	}
	seen := make(map[string]struct{})
	var dup *DuplicateNamesError
	for b := range r.src {
		set := b.Settings()
		name := LabelValue(set.Name)
		if _, ok := seen[name]; ok {
			if dup == nil {
				dup = &DuplicateNamesError{Skipped: make(map[string]int)}
			}
			dup.Skipped[name]++
			continue
		}
		seen[name] = struct{}{}
		s := Sample{
			Name:       name,
			State:      b.State(),
			Counts:     b.Counts(),
			Windowed:   set.WindowSize > 0,
			Collecting: set.CollectMetrics,
			Capped:     set.OpenGate != nil,
		}
		if s.Collecting {
			s.Metrics = b.Metrics()
		}
		if f, ok := b.(FleetMember); ok {
			s.Fleet, s.FleetStats = true, f.FleetStats()
		}
		switch {
		case r.tr != nil:
			s.Transitions = r.tr.counts(set.Name)
		case s.Collecting:
			s.Transitions = fromMetrics(&s.Metrics)
		}
		fn(s)
	}
	if r.tr != nil {
		r.tr.end(r.mark, read)
	}
	if dup != nil {
		return dup
	}
	return nil
}

// Duplicates returns the names err, an error of Read, says are shared,
// with the number of breakers left out under each; nil if err is not
// (or does not wrap) a *DuplicateNamesError.
func Duplicates(err error) map[string]int {
	var dup *DuplicateNamesError
	if errors.As(err, &dup) {
		return dup.Skipped
	}
	return nil
}

// LabelValue is name as a label value, which must be valid UTF-8: each
// byte of name that is not part of a valid UTF-8 sequence is written as
// \x and two lower-case hex digits, as Go's %q writes it ("\xff.example"
// for a host parsed from "http://%ff.example/"); a valid name is
// returned as it is. Two names that differ only there (the bytes or
// their escapes) then share a label value, which a read reports as
// breakers of one name.
func LabelValue(name string) string {
	if utf8.ValidString(name) {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRuneInString(name[i:])
		if r == utf8.RuneError && n == 1 {
			fmt.Fprintf(&b, `\x%02x`, name[i])
		} else {
			b.WriteString(name[i : i+n])
		}
		i += n
	}
	return b.String()
}

// fromMetrics lists the non-zero transition counts of m, ordered.
func fromMetrics(m *core.Metrics) []TransitionCount {
	var out []TransitionCount
	for from := range m.Transitions {
		for to, n := range m.Transitions[from] {
			if n > 0 {
				out = append(out, TransitionCount{From: core.State(from), To: core.State(to), Count: n})
			}
		}
	}
	return out
}
