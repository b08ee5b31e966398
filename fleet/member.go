package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/core"
)

// Member is one replica's breaker in a fleet: a core.Breaker that detects
// on its own, publishes its trips to the store, adopts the fleet's open
// state once a quorum of members tripped, and takes a probe lease from the
// store before each half-open probe of a fleet-wide open period. Make one
// with New and stop it with Close. Every method is safe for concurrent
// use.
//
// A Member embeds its breaker, whose methods it has: Allow, Done, Record
// and the rest are the breaker's own, so they cost what they cost on a
// breaker alone, do no I/O and allocate nothing while the breaker is
// closed or open. The fleet is the breaker's core.ProbeGate: a half-open
// probe of a fleet open period makes the one store call of the call path,
// a lease bounded by Options.StoreTimeout, inside Allow; without a lease
// Allow refuses it with an error matching ErrLeaseRefused (or
// ErrStoreUnavailable) and core.ErrHalfOpenFull, whose RetryAfter says
// when a lease may be free. The manual controls (ForceOpen, Reset, ...)
// move the local breaker only; the fleet's next verdict moves it again. A
// Member is a core.Guard, so core.Do and the resilience package's stacks
// take it. A zero Member has no breaker: Close, Stats, FleetStats and
// Name panic naming New, the breaker's methods with a nil dereference.
// Do not replace the embedded Breaker.
type Member struct {
	*core.Breaker
	o     Options
	clock core.Clock
	// The fleet's verdict rules and open duration, from the breaker's
	// settings.
	successes, failures int
	openMs              int64
	// refusalMs is the longest a refusal asks its caller to wait: the
	// breaker's HalfOpenFullWait, in whole milliseconds (at least 1).
	refusalMs int64
	keys      [4]string // state, trips, generations, lease
	channel   string
	// instance tells this Member from an earlier one of the same name (a
	// restarted replica), whose breaker generations the store fenced.
	instance string

	// Read on the call path.

	// period is the fleet open period this member adopted, whose
	// half-open probes need a lease; nil while the fleet is closed.
	period atomic.Pointer[period]
	// local is set while the store cannot be reached: the member is a
	// plain local breaker.
	local atomic.Bool
	// refusedUntil is the breaker clock reading before which a probe is
	// refused without asking the store (the wait of the last refusal).
	refusedUntil atomic.Int64
	holders      atomic.Uint64 // numbers the leases this member asked for

	// tripGen is the breaker generation of the last local trip, which the
	// background loop publishes; wake tells it there is work.
	tripGen atomic.Uint64
	wake    chan struct{}
	reports chan report
	// abandoned holds the leases asked for by calls that gave up at the
	// store deadline, to release when the store answers again.
	abandoned chan lease

	mu     sync.Mutex
	leases map[uint64][]lease // leased probe permits not yet reported, by breaker generation; guarded by mu

	version atomic.Uint64 // the version adopted last, for Stats
	stats   counters

	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// lease is a probe lease the store granted: its holder name and the open
// period (version) it belongs to.
type lease struct {
	holder  string
	version uint64
}

// period is an adopted fleet open period: its version, and the breaker
// generation the adoption moved the breaker to. Only probes of that
// generation or a later one are the period's: an earlier one is of a
// half-open the adoption superseded.
type period struct {
	version, gen uint64
}

// report is a leased probe's outcome on its way to the store.
type report struct {
	lease
	outcome core.Outcome
}

// New makes a member of the fleet o.Key on o.Client, whose breaker is
// core.New(cfg), and starts its background loop (one goroutine, which
// Close stops). cfg.OnStateChange, if set, hears every transition, those
// the fleet makes (ForceOpen, HalfOpen and Reset of adopted states,
// reason manual) included. New waits for no I/O: the loop reads the
// fleet's state after New returns, and until then the member is a plain
// local breaker in cfg's initial state. It returns cfg's validation
// errors and errors matching ErrInvalidOptions that name a bad option;
// it never panics.
func New(cfg core.Config, o Options) (*Member, error) {
	s, err := cfg.Validate()
	var oerr error
	o, oerr = o.resolved(s.PermittedCallsInHalfOpen, s.HalfOpenFullWait)
	if cfg.ProbeGate != nil {
		oerr = errors.Join(oerr, fmt.Errorf("%w: Config.ProbeGate is set: a Member is its breaker's probe gate", ErrInvalidOptions))
	}
	if err = errors.Join(err, oerr); err != nil {
		return nil, err
	}
	m := newMember(s, o)
	m.hook(&cfg)
	b, err := core.New(cfg)
	if err != nil {
		return nil, err
	}
	m.start(b)
	return m, nil
}

// newMember is the member of the fleet o.Key (o resolved) for a breaker
// with settings s, before it has its breaker (start).
func newMember(s core.Settings, o Options) *Member {
	tag := "{casbreaker:" + o.Key + "}"
	return &Member{
		o:         o,
		successes: s.SuccessesToClose,
		failures:  s.FailuresToReopen,
		openMs:    (s.OpenDuration + time.Millisecond - 1).Milliseconds(), // rounded up, as the breaker keeps it
		refusalMs: max(s.HalfOpenFullWait.Milliseconds(), 1),
		keys:      [4]string{tag + ":state", tag + ":trips", tag + ":gens", tag + ":lease"},
		channel:   "casbreaker:" + o.Key,
		instance:  randomName(),
		wake:      make(chan struct{}, 1),
		reports:   make(chan report, 64),
		abandoned: make(chan lease, 16),
		leases:    make(map[uint64][]lease),
		done:      make(chan struct{}),
	}
}

// hook makes the member the listener and the probe gate of the breaker
// cfg will make: it hears every transition before cfg's own listener, and
// asks for a probe's lease.
func (m *Member) hook(cfg *core.Config) {
	user := cfg.OnStateChange
	cfg.OnStateChange = func(t core.Transition) {
		m.transition(t)
		if user != nil {
			user(t)
		}
	}
	cfg.ProbeGate = (*probeGate)(m)
}

// start gives the member its breaker, made from the config hook changed,
// and starts its background loop.
func (m *Member) start(b *core.Breaker) {
	m.Breaker, m.clock = b, b.Settings().Clock
	ctx, stop := context.WithCancel(context.Background())
	m.stop = stop
	go m.loop(ctx)
}

// Close stops the member's background loop and waits for it (a store
// call of the loop's that the client does not give up at its deadline,
// such as a new connection's handshake to a hung server, holds it up to
// the client's DialTimeout). The member
// keeps working as a plain local breaker: no store call is made after
// Close returns, and its half-open probes go out as a local breaker's
// (with Options.FailClosed too: the fleet period it had adopted is
// dropped, and Stats.FleetOpen is false). It returns nil; a second Close
// does nothing.
func (m *Member) Close() error {
	m.breaker()
	m.closeOnce.Do(func() {
		m.stop()
		<-m.done
		m.local.Store(true) // after the loop's last word, which may have cleared it
		// No loop adopts a period any more: without this, a FailClosed
		// member closed while its fleet was open refused every probe.
		m.period.Store(nil)
	})
	return nil
}

const noNew = "fleet: Member used without New: make one with fleet.New"

var _ core.Guard = (*Member)(nil)

// probeGate is a Member as its breaker's core.ProbeGate, so that the
// gate's methods are not the Member's.
type probeGate Member

// AdmitProbe takes a lease for a probe of a fleet open period; see Member.
func (g *probeGate) AdmitProbe(p core.Permit) (time.Duration, error) { return (*Member)(g).probe(p) }

// ProbeDone hands a leased probe's outcome to the background loop.
func (g *probeGate) ProbeDone(p core.Permit, o core.Outcome) { (*Member)(g).reported(p, o) }

// probe decides whether the local probe permit p goes out: a wait and a
// refusal, or nil to let it go. If the store does not answer, the probe
// goes out as a local breaker's would, unless Options.FailClosed.
func (m *Member) probe(p core.Permit) (time.Duration, error) {
	per := m.period.Load()
	if per == nil {
		return 0, nil // the member's own trip: it probes as a local breaker
	}
	if m.local.Load() {
		return m.unreachable()
	}
	now := m.clock.Now()
	if p.Generation < per.gen {
		// A probe of a half-open the adoption superseded: its lease
		// would be the new period's, which is still open.
		d := max(m.RetryAfter(), time.Millisecond)
		m.refusedUntil.Store(int64(now + d))
		return m.refuse(d)
	}
	if until := time.Duration(m.refusedUntil.Load()); now < until {
		return m.refuse(until - now)
	}
	epoch := per.version
	holder := m.o.Member + "/" + strconv.FormatUint(m.holders.Inc(), 10)
	st, err := m.inline(leaseScript, []string{m.keys[0], m.keys[3]},
		epoch, holder, m.o.Probes, m.o.LeaseTTL.Milliseconds(), m.refusalMs)
	if err != nil {
		// The store may still run the request (a hung server resumes its
		// buffered commands): the loop releases the lease once the store
		// answers again, so that it need not wait out its TTL.
		select {
		case m.abandoned <- lease{holder: holder, version: epoch}:
		default:
		}
		m.storeFailed()
		return m.unreachable()
	}
	granted, wait := st.extra[0] == "1", parseInt(st.extra[1])
	if granted {
		m.stats.granted.Inc()
		m.mu.Lock()
		m.leases[p.Generation] = append(m.leases[p.Generation], lease{holder: holder, version: epoch})
		m.mu.Unlock()
		return 0, nil
	}
	if wait == 0 {
		// The fleet moved past this open period: refuse for a poll
		// interval while the loop reads what it moved to.
		m.poke()
		wait = max(m.o.PollInterval.Milliseconds(), 1)
	}
	d := time.Duration(wait) * time.Millisecond
	m.refusedUntil.Store(int64(now + d))
	return m.refuse(d)
}

// inline runs a script for a caller, who waits StoreTimeout at most: the
// script runs on a goroutine of its own, given up at the deadline, since
// a client may take longer than its context allows on some paths (a new
// connection's handshake to a hung server took up to its DialTimeout).
// A script given up on may still run on the store: its lease is released
// later (abandoned).
func (m *Member) inline(s *redis.Script, keys []string, args ...any) (shared, error) {
	ctx, cancel := context.WithTimeout(context.Background(), m.o.StoreTimeout)
	defer cancel()
	type result struct {
		st  shared
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := m.run(ctx, s, keys, args...)
		done <- result{st, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		r.err = ctx.Err()
	}
	if r.err != nil {
		m.stats.storeErrors.Inc()
	}
	return r.st, r.err
}

// refuse refuses a probe for want of a lease for d (the breaker gives
// its slot back).
func (m *Member) refuse(d time.Duration) (time.Duration, error) {
	m.stats.refused.Inc()
	return d, leaseRefusal{m}
}

// unreachable decides a probe while the store cannot be reached.
func (m *Member) unreachable() (time.Duration, error) {
	if !m.o.FailClosed {
		return 0, nil
	}
	m.stats.refused.Inc()
	return m.o.MinBackoff, storeRefusal{m}
}

// reported queues a leased probe's outcome for the store. A full queue
// drops it: its lease then runs out on the store after its TTL.
func (m *Member) reported(p core.Permit, o core.Outcome) {
	m.mu.Lock()
	ls := m.leases[p.Generation]
	if len(ls) == 0 {
		m.mu.Unlock()
		return
	}
	l := ls[len(ls)-1]
	if len(ls) == 1 {
		delete(m.leases, p.Generation)
	} else {
		m.leases[p.Generation] = ls[:len(ls)-1]
	}
	m.mu.Unlock()
	select {
	case m.reports <- report{lease: l, outcome: o}:
	default:
		m.stats.dropped.Inc()
	}
}

// transition hears the breaker's transitions: every move to open by the
// breaker's own rules (a trip from closed, a probe's failure in
// half-open) is the member's to publish, so that members probing on their
// own after the store lost the fleet's state form a quorum again. Manual
// controls (the fleet's adoptions among them) are not published.
func (m *Member) transition(t core.Transition) {
	if t.To == core.Open && t.Reason != core.ReasonManual {
		m.tripGen.Store(t.Generation)
		m.poke()
	}
}

// poke wakes the background loop without waiting.
func (m *Member) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// breaker returns the member's breaker, or panics naming New for a zero
// or nil Member.
func (m *Member) breaker() *core.Breaker {
	if m == nil || m.Breaker == nil {
		panic(noNew)
	}
	return m.Breaker
}

// Name is the member's name in the store (Options.Member, or the random
// one New chose).
func (m *Member) Name() string {
	m.breaker()
	return m.o.Member
}

// randomName is a member name no other member has: 16 random hex digits.
func randomName() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

func validUTF8(s string) bool { return utf8.ValidString(s) }

// shared is a script's answer: the state and the script's own fields.
type shared struct {
	inc     string
	version uint64
	open    bool
	until   int64 // the open deadline, ms on the store's clock
	now     int64 // the store's clock when the script ran
	extra   [2]string
}

// eval runs a script and parses its answer, counting a failure.
func (m *Member) eval(ctx context.Context, s *redis.Script, keys []string, args ...any) (shared, error) {
	st, err := m.run(ctx, s, keys, args...)
	if err != nil {
		m.stats.storeErrors.Inc()
	}
	return st, err
}

// run runs a script and parses its answer.
func (m *Member) run(ctx context.Context, s *redis.Script, keys []string, args ...any) (shared, error) {
	v, err := s.Run(ctx, m.o.Client, keys, args...).StringSlice()
	if err != nil {
		return shared{}, err
	}
	if len(v) < 5 {
		return shared{}, errors.New("fleet: a store script returned " + strconv.Itoa(len(v)) + " fields, want 5 or more")
	}
	st := shared{inc: v[0], version: uint64(parseInt(v[1])), open: v[2] == "open", until: parseInt(v[3]), now: parseInt(v[4])}
	copy(st.extra[:], v[5:])
	return st, nil
}

// parseInt parses a script's number; the scripts write only integers.
func parseInt(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
