package race_test

import (
	"bytes"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/casbreaker/casbreaker/core"
)

// schedule forces an interleaving without timing and records it as lanes,
// one per goroutine, for the teaching pairs (teaching_test.go). The test's
// own goroutine is the controller: it starts goroutines (spawn), lets a
// parked one go on (release) and moves the clock, one action at a time, and
// after each action waits until every goroutine it started is quiet
// (settle): parked by a hook of the schedule, blocked on a lock or a
// channel, or finished. Quiet is read from the runtime's own goroutine
// states (runtime.Stack), never from a timeout, so the order of steps is
// the same on every run and every machine, and a goroutine that blocks for
// good is seen as blocked at once: the controller then fails the test saying
// which goroutine waits on what (a deadlock never passes by a timeout, and
// never hangs the test). Only a goroutine that spins for ever outlasts
// settle; go test's -timeout ends that one, as a failure.
//
// Every goroutine and hook writes what it does into its lane (note, park),
// and the controller marks the step where the race is lost (mark). Within
// one step the lane the action started or released is drawn first and the
// others after it, each in its own order: a release that lets several
// goroutines run (a mutex handed from one to the next) is drawn the same on
// every run.
type schedule struct {
	t testing.TB

	mu     sync.Mutex
	lanes  []*lane // lanes[0] is the controller, "test"
	byID   map[uint64]*lane
	events []laneEvent
	step   int         // the controller's actions so far
	first  map[int]int // step -> the lane its action started or released
	shown  bool        // the lanes were logged (drawn): a failure need not log them again
}

// lane is one goroutine of a schedule.
type lane struct {
	index, id int
	name      string
	parked    bool          // blocked in park, waiting for release
	release   chan struct{} // closed by the controller's release
	finished  bool
	blocked   string // the wait reason settle last found it blocked in, outside park
	points    int    // park points passed so far (point)
	parkAt    int    // the park point it parks at; 0: none
}

type laneEvent struct {
	step, lane int
	text       string
	mark       string
}

// The marks of a losing step: where the naive version breaks the rule, and
// where a real one turns the loser of the same race away.
const (
	markBroken = "✗"
	markKept   = "✓"
)

// newSchedule makes a schedule whose controller lane is called controller.
func newSchedule(t testing.TB, controller string) *schedule {
	s := &schedule{t: t, byID: map[uint64]*lane{}, first: map[int]int{}}
	s.lanes = []*lane{{name: controller}}
	t.Cleanup(s.rescue)
	t.Cleanup(func() {
		if s.t.Failed() && !s.shown {
			s.t.Log("the interleaving so far, one column per goroutine, time downward:\n" + s.lanesText())
		}
	})
	return s
}

// spawn starts fn on a new goroutine, the lane called name, and returns its
// lane; the caller settles when it wants the goroutine to have gone as far
// as it can. With parkAt n > 0 the lane parks at its n-th park point
// (point: a schedClock reading, or a naive breaker's hook).
func (s *schedule) spawn(name string, parkAt int, fn func()) *lane {
	s.mu.Lock()
	l := &lane{index: len(s.lanes), name: name, parkAt: parkAt}
	s.lanes = append(s.lanes, l)
	s.step++
	s.first[s.step] = l.index
	s.mu.Unlock()
	go func() {
		id := goid()
		s.mu.Lock()
		l.id = int(id)
		s.byID[id] = l
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			l.finished = true
			s.mu.Unlock()
		}()
		fn()
	}()
	return l
}

// release lets l, parked, go on.
func (s *schedule) release(l *lane) {
	s.mu.Lock()
	if !l.parked {
		s.mu.Unlock()
		s.t.Fatalf("schedule: release of lane %q, which is not parked", l.name)
	}
	l.parked = false
	s.step++
	s.first[s.step] = l.index
	close(l.release)
	s.mu.Unlock()
}

// act runs fn on the controller as a step of its own, written down as the
// text fn returns.
func (s *schedule) act(fn func() string) {
	s.mu.Lock()
	s.step++
	s.first[s.step] = 0
	s.mu.Unlock()
	text := fn()
	s.mu.Lock()
	s.events = append(s.events, laneEvent{step: s.step, lane: 0, text: text})
	s.mu.Unlock()
}

// current is the lane of the calling goroutine: the controller's for a
// goroutine the schedule did not start.
func (s *schedule) current() *lane {
	id := goid()
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.byID[id]; ok {
		return l
	}
	return s.lanes[0]
}

// note writes text into the calling goroutine's lane. The controller's
// lane holds only what act writes: the steps inside an act are its text.
func (s *schedule) note(text string) {
	l := s.current()
	if l.index == 0 {
		return
	}
	s.mu.Lock()
	s.events = append(s.events, laneEvent{step: s.step, lane: l.index, text: text})
	s.mu.Unlock()
}

// park writes text (if any) into the calling goroutine's lane and blocks it
// until the controller releases it. On the controller it does nothing.
func (s *schedule) park(text string) {
	l := s.current()
	if l.index == 0 {
		return
	}
	s.mu.Lock()
	if text != "" {
		s.events = append(s.events, laneEvent{step: s.step, lane: l.index, text: text})
	}
	l.parked = true
	l.release = make(chan struct{})
	ch := l.release
	s.events = append(s.events, laneEvent{step: s.step, lane: l.index, text: "(parked)"})
	s.mu.Unlock()
	<-ch
}

// point is a park point of the calling lane: it parks there if this is
// the lane's parkAt-th point, and only notes text otherwise.
func (s *schedule) point(text string) {
	l := s.current()
	s.mu.Lock()
	l.points++
	here := l.index != 0 && l.points == l.parkAt
	s.mu.Unlock()
	if here {
		s.park(text)
	} else {
		s.note(text)
	}
}

// mark marks the last step written into l as where the race is lost.
func (s *schedule) mark(l *lane, m string) { s.markStep(l, "", m) }

// markStep marks the last step written into l that starts with prefix.
func (s *schedule) markStep(l *lane, prefix, m string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.events) - 1; i >= 0; i-- {
		if e := &s.events[i]; e.lane == l.index && strings.HasPrefix(e.text, prefix) {
			e.mark = m
			return
		}
	}
	s.t.Fatalf("schedule: lane %q has no step starting with %q to mark", l.name, prefix)
}

// settle waits until every lane is quiet: finished, parked, or blocked in
// the runtime (on a lock, a channel, a WaitGroup). A lane blocked outside
// park gets a step saying on what.
func (s *schedule) settle() {
	for !s.quiet() {
		runtime.Gosched()
	}
}

// quiet reads the lanes' flags, then the runtime's goroutine states, then
// the flags again: a lane that finished, parked or wrote a step while the
// states were read makes the reading void (its states would be half
// before and half after), so a lane seen waiting is waiting on something
// no lane is about to release.
func (s *schedule) quiet() bool {
	s.mu.Lock()
	before := s.progress()
	s.mu.Unlock()
	states := goroutineStates()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.progress() != before {
		return false
	}
	blocked := map[*lane]string{}
	for _, l := range s.lanes[1:] {
		if l.finished {
			continue
		}
		reason, alive := states[uint64(l.id)]
		switch {
		case l.id == 0 || !alive:
			return false // not started yet, or finishing
		case !waiting(reason):
			return false
		case !l.parked:
			blocked[l] = reason
		}
	}
	for _, l := range s.lanes[1:] {
		reason := blocked[l]
		if reason != "" && reason != l.blocked {
			s.events = append(s.events, laneEvent{step: s.step, lane: l.index, text: "(waits: " + reason + ")"})
			// A goroutine found blocked is not held at a park point
			// later: it goes on as soon as it can, so the order in which
			// a lock hands itself on does not change the schedule.
			l.parkAt = 0
		}
		l.blocked = reason
	}
	return true
}

// progress is a summary of what the lanes have done: it changes whenever a
// lane starts, writes a step, parks or finishes. Called with mu held.
func (s *schedule) progress() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", len(s.events))
	for _, l := range s.lanes[1:] {
		fmt.Fprintf(&b, " %d/%t/%t", l.id, l.parked, l.finished)
	}
	return b.String()
}

// done reports whether l has returned.
func (s *schedule) done(l *lane) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return l.finished
}

// isParked reports whether l is parked by a hook of the schedule.
func (s *schedule) isParked(l *lane) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return l.parked
}

// blockedOn is the runtime wait reason l was blocked in at the last settle,
// outside park ("sync.Mutex.Lock"), or "".
func (s *schedule) blockedOn(l *lane) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return l.blocked
}

// finish releases every parked lane, again and again, until all have
// returned, and fails the test if some lane is still blocked with nothing
// left to release: a deadlock, named, instead of a hang or a timeout.
func (s *schedule) finish() {
	for {
		s.settle()
		var parked, stuck []*lane
		s.mu.Lock()
		for _, l := range s.lanes[1:] {
			switch {
			case l.parked:
				parked = append(parked, l)
			case !l.finished:
				stuck = append(stuck, l)
			}
		}
		s.mu.Unlock()
		if len(parked) == 0 {
			if len(stuck) > 0 {
				s.t.Fatalf("deadlock: with nothing left parked, %s", s.describe(stuck))
			}
			return
		}
		s.release(parked[0])
	}
}

// describe says on what each of ls is blocked.
func (s *schedule) describe(ls []*lane) string {
	var parts []string
	for _, l := range ls {
		parts = append(parts, fmt.Sprintf("%q is blocked in %s", l.name, s.blockedOn(l)))
	}
	return strings.Join(parts, ", ") + "\n" + s.lanesText()
}

// rescue runs when the test ends: a test that failed with a lane parked
// releases it, so that goleak reports the failure, not a leak. A lane
// blocked for good stays blocked (the failure says so).
func (s *schedule) rescue() {
	for range len(s.lanes) {
		var parked *lane
		s.mu.Lock()
		for _, l := range s.lanes[1:] {
			if l.parked {
				parked = l
				break
			}
		}
		s.mu.Unlock()
		if parked == nil {
			return
		}
		s.release(parked)
		s.settle()
	}
}

// lanesText draws the recorded steps: one column per lane that has a step,
// time downward, one step per row, a losing step marked.
func (s *schedule) lanesText() string {
	s.mu.Lock()
	evs := slices.Clone(s.events)
	lanes := slices.Clone(s.lanes)
	first := maps.Clone(s.first)
	s.mu.Unlock()
	// Steps are drawn in action order; within a step, the lane the action
	// started or released first.
	rank := func(e laneEvent) int {
		if e.lane == first[e.step] {
			return -1
		}
		return e.lane
	}
	slices.SortStableFunc(evs, func(a, b laneEvent) int {
		if a.step != b.step {
			return a.step - b.step
		}
		return rank(a) - rank(b)
	})
	used := map[int]bool{}
	for _, e := range evs {
		used[e.lane] = true
	}
	var cols []int
	width := map[int]int{}
	for i, l := range lanes {
		if used[i] {
			cols = append(cols, i)
			width[i] = utf8.RuneCountInString(l.name)
		}
	}
	cell := func(e laneEvent) string {
		if e.mark != "" {
			return e.mark + " " + e.text
		}
		return e.text
	}
	for _, e := range evs {
		width[e.lane] = max(width[e.lane], utf8.RuneCountInString(cell(e)))
	}
	var b strings.Builder
	row := func(texts map[int]string) {
		var line strings.Builder
		for k, c := range cols {
			if k > 0 {
				line.WriteString(" | ")
			}
			txt := texts[c]
			line.WriteString(txt)
			line.WriteString(strings.Repeat(" ", width[c]-utf8.RuneCountInString(txt)))
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	names := map[int]string{}
	rule := map[int]string{}
	for _, c := range cols {
		names[c] = lanes[c].name
		rule[c] = strings.Repeat("-", width[c])
	}
	row(names)
	row(rule)
	for _, e := range evs {
		row(map[int]string{e.lane: cell(e)})
	}
	return b.String()
}

// goid is the calling goroutine's id, from the header of its stack trace
// ("goroutine 7 [running]:"). Tests only: the runtime keeps it private.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, err := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	if err != nil {
		panic("goid: " + err.Error())
	}
	return id
}

// goroutineStates maps every goroutine's id to its state as a stack dump
// names it: "running", "runnable", or the wait reason of a blocked one
// ("chan receive", "sync.Mutex.Lock", ...), without its duration.
func goroutineStates() map[uint64]string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	states := map[uint64]string{}
	for _, block := range bytes.Split(buf, []byte("\n\n")) {
		header, _, _ := bytes.Cut(block, []byte("\n"))
		rest, ok := bytes.CutPrefix(header, []byte("goroutine "))
		if !ok {
			continue
		}
		idText, state, ok := bytes.Cut(rest, []byte(" ["))
		if !ok {
			continue
		}
		id, err := strconv.ParseUint(string(idText), 10, 64)
		if err != nil {
			continue
		}
		state, _, _ = bytes.Cut(state, []byte("]"))
		state, _, _ = bytes.Cut(state, []byte(","))
		states[id] = string(state)
	}
	return states
}

// waiting reports whether a goroutine in state can run again only when
// another goroutine acts: blocked on a channel, a lock, a WaitGroup or a
// condition. Running, runnable, in a system call, asleep on a timer or in
// the runtime's own waits are not: "semacquire" is also where a goroutine
// starting a garbage collection waits for the stop-the-world of the very
// runtime.Stack that reads the states.
func waiting(state string) bool {
	return strings.HasPrefix(state, "chan ") || strings.HasPrefix(state, "select") || strings.HasPrefix(state, "sync.")
}

// schedClock is the manual clock of a schedule: each reading by a lane is
// one of its park points (point), so a lane can be parked right after a
// clock reading: a goroutine descheduled between its reading and what it
// does next. The controller's readings are not written down.
type schedClock struct {
	*core.ManualClock
	s *schedule
}

func (c *schedClock) Now() time.Duration {
	v := c.ManualClock.Now()
	if c.s.current().index != 0 {
		c.s.point("reads clock: " + v.String())
	}
	return v
}
