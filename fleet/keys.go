package fleet

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/observe"
	"github.com/casbreaker/casbreaker/registry"
)

// Keys makes every breaker of a registry a fleet member of its own: set
// it as registry.Options.Extension (or httpbreaker's or grpcbreaker's
// Options.Extension), and each key's breaker publishes its trips, adopts
// its fleet's open state and takes its probes' leases as a Member does,
// with its fleet named Options.Key + ":" + the breaker's name (the
// registry's Name of the key; '%', '{' and '}' in it written %25, %7B and
// %7D, so that every name is a valid Key). The registry's breakers are
// the members' breakers: their Allow and Done are the registry's, with the
// member as the breaker's core.ProbeGate. Each member has its own
// goroutine and subscription (one connection of the client's pool), as a
// Group's: Keys suits the tens or hundreds of dependencies a service
// calls, not a registry of thousands of keys. A member whose breaker the
// registry evicts is closed (in the background: eviction does not wait
// for its loop).
//
// A key's member is made with its breaker, on the key's first Get, and
// waits for no I/O, as New: the call that made it goes out before the
// member's first read of the store (a few milliseconds later), so on a
// replica that starts while the fleet is open, each key's first call
// reaches the dependency before the member adopts the open state. The
// fleet's adoptions are the breaker's manual controls (ForceOpen,
// HalfOpen, Reset): a listener hears them with core.ReasonManual. The
// template must not set Config.ProbeGate (every Get then fails with
// ErrInvalidOptions). The store's keys of a fleet outlive its members:
// see docs/fleet.md for what each keeps and for how long.
//
// Make one with NewKeys: the methods of a zero or nil Keys panic naming
// NewKeys. Safe for concurrent use.
type Keys struct {
	o       Options
	members sync.Map // breaker name -> *Member
	mu      sync.Mutex
	closed  bool // guarded by mu
	// closing counts the evicted members being closed in the background,
	// for Close to wait for; idle is signalled when it drops to zero.
	// Both guarded by mu.
	closing int
	idle    *sync.Cond
}

var _ registry.Extension = (*Keys)(nil)

// NewKeys returns the Keys of the fleets o.Key + ":" + name on o.Client.
// Options that depend on a breaker's settings (Probes, LeaseTTL) are
// resolved for each breaker from its own. It returns errors matching
// ErrInvalidOptions that name a bad option, checked as New checks them
// (with a breaker of the default settings), and makes no store call.
func NewKeys(o Options) (*Keys, error) {
	if _, err := o.resolved(1, time.Second); err != nil {
		return nil, err
	}
	k := &Keys{o: o}
	k.idle = sync.NewCond(&k.mu)
	return k, nil
}

// Extend makes the member of the breaker named name, the breaker's
// listener and probe gate: registry.Extension's method, which the
// registry calls. It returns an error matching ErrInvalidOptions for a
// config with a ProbeGate of its own. After Close it makes no member:
// the breaker is a plain local one.
func (k *Keys) Extend(name string, c *core.Config) (registry.Extended, error) {
	k.mustBeNew()
	k.mu.Lock()
	closed := k.closed
	k.mu.Unlock()
	if closed {
		return nil, nil
	}
	if c.ProbeGate != nil {
		return nil, fmt.Errorf("%w: Config.ProbeGate is set: a fleet member is its breaker's probe gate", ErrInvalidOptions)
	}
	s, err := c.Validate()
	if err != nil {
		return nil, err
	}
	o := k.o
	o.Key += ":" + keyOf(name)
	if o, err = o.resolved(s.PermittedCallsInHalfOpen, s.HalfOpenFullWait); err != nil {
		return nil, err
	}
	m := newMember(s, o)
	m.hook(c)
	return &keyMember{k: k, name: name, m: m}, nil
}

// keyOf is a breaker's name as part of a Key: '%', '{' and '}' escaped.
func keyOf(name string) string {
	if !strings.ContainsAny(name, "%{}") {
		return name
	}
	return strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D").Replace(name)
}

// Member returns the member of the breaker named name, and true, while
// the registry holds that breaker; nil and false otherwise.
func (k *Keys) Member(name string) (*Member, bool) {
	k.mustBeNew()
	m, ok := k.members.Load(name)
	if !ok {
		return nil, false
	}
	return m.(*Member), true
}

// Source returns an observe.Source of every member the registry holds a
// breaker of, at each read (as Group.Source): each member's breaker
// series and fleet series, under its breaker's name.
func (k *Keys) Source() observe.Source {
	k.mustBeNew()
	return func(yield func(observe.Breaker) bool) {
		k.members.Range(func(_, m any) bool { return yield(m.(*Member)) })
	}
}

// Close closes every member (Member.Close: their breakers go on as local
// ones), and waits for the members of evicted breakers that are being
// closed in the background, so that no member's loop runs and no store
// call is made once it returns; the breakers the registry makes after it
// are plain local ones. It returns nil; a second Close does nothing more.
func (k *Keys) Close() error {
	k.mustBeNew()
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.members.Range(func(_, m any) bool {
		m.(*Member).Close()
		return true
	})
	k.mu.Lock()
	for k.closing > 0 {
		k.idle.Wait()
	}
	k.mu.Unlock()
	return nil
}

// closeInBackground removes the member m of the evicted breaker named
// name and closes it without making the registry's caller wait for its
// loop, counted for Close: removed and counted under the mutex, so that a
// Close either finds m among the members or finds it counted.
func (k *Keys) closeInBackground(name string, m *Member) {
	k.mu.Lock()
	k.members.CompareAndDelete(name, m)
	k.closing++
	k.mu.Unlock()
	go func() {
		m.Close()
		k.mu.Lock()
		if k.closing--; k.closing == 0 {
			k.idle.Broadcast()
		}
		k.mu.Unlock()
	}()
}

// mustBeNew panics naming NewKeys for a zero or nil Keys.
func (k *Keys) mustBeNew() {
	if k == nil || k.o.Client == nil {
		panic("fleet: Keys used without NewKeys: make one with fleet.NewKeys")
	}
}

// keyMember is a Keys member as the registry's part of one breaker.
type keyMember struct {
	k       *Keys
	name    string
	m       *Member
	started bool // Made ran; the registry calls Made and Dropped in order
}

// Made starts the member with the registry's breaker, unless Close ran
// since Extend: then the member is never started, and the breaker is a
// plain local one (a gate with no fleet period lets every probe go).
// Under Keys' mutex, so that Close either sees the member or finds it
// never started.
func (p *keyMember) Made(b *core.Breaker) {
	p.k.mu.Lock()
	defer p.k.mu.Unlock()
	if p.k.closed {
		return
	}
	p.m.start(b)
	p.started = true
	p.k.members.Store(p.name, p.m)
}

// Dropped closes the member of a breaker the registry let go, in the
// background (Close waits for it).
func (p *keyMember) Dropped() {
	if !p.started {
		return
	}
	p.k.closeInBackground(p.name, p.m)
}
