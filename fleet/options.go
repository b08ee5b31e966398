package fleet

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrInvalidOptions is what every error of New about Options matches with
// errors.Is; the error's text names the option and what is wrong with it.
var ErrInvalidOptions = errors.New("fleet: invalid options")

// Default option values, used where an Options field is zero.
const (
	DefaultQuorum       = 2
	DefaultStoreTimeout = 50 * time.Millisecond
	DefaultPollInterval = 100 * time.Millisecond
	DefaultMinBackoff   = 50 * time.Millisecond
	DefaultMaxBackoff   = 5 * time.Second
)

// Options configures a fleet member: the store, the key the fleet shares
// and the fleet's rules. The breaker's own rules come from core.Config.
type Options struct {
	// Client is the Redis client the member talks to the store through:
	// a *redis.Client or a *redis.ClusterClient (the tests run Redis 7,
	// one server and a cluster; Valkey speaks the same protocol but is
	// not tested). It must have ContextTimeoutEnabled set, so that a store
	// call's deadline (StoreTimeout) bounds its socket reads and writes
	// too; New refuses one without it, since a hung Redis would then hold
	// a call for the client's ReadTimeout. The member does not close it.
	// Required.
	Client redis.UniversalClient
	// Key names the breaker the fleet shares: every member with the same
	// Key on the same store is one fleet. The store's keys are
	// "{casbreaker:Key}:state" and its siblings, the braces a hash tag
	// that keeps them in one Redis Cluster slot, and the channel
	// "casbreaker:Key". Non-empty, valid UTF-8, without '{' or '}'.
	// Required.
	Key string
	// Member names this member in the store, where its trips are counted
	// towards the quorum as one member's. Two members with one name count
	// as one. Zero: a random name, new for every New.
	Member string
	// Quorum is how many distinct members must have reported a trip
	// within the open duration (on the store's clock) before the fleet
	// opens. Zero: DefaultQuorum (2), so that one member with a bad
	// network path, a bad configuration or a bug of its own cannot open
	// the breaker of every other member: it stays open alone. 1 makes
	// every member's trip the fleet's. 1..1000.
	Quorum int
	// Probes is the fleet's probe budget: how many probe leases the store
	// grants per half-open period, across every member. Zero: the
	// breaker's PermittedCallsInHalfOpen. 1..127.
	Probes int
	// LeaseTTL is how long a probe lease lasts on the store's clock
	// before it is presumed lost (its holder died or hung) and its slot
	// returned to the budget. Set it above the longest probe call: a probe
	// reported after it is not counted in the verdict. Zero: the
	// breaker's HalfOpenFullWait. At least 1 ms.
	LeaseTTL time.Duration
	// StoreTimeout bounds every store call, the inline lease request of a
	// half-open Allow included: a call to a slow or partitioned store
	// gives up after it and the member runs as a local breaker. Zero:
	// DefaultStoreTimeout (50 ms). At least 1 ms.
	StoreTimeout time.Duration
	// PollInterval is how often a member reads the shared state while the
	// store answers, the fallback for a publish/subscribe message that
	// did not arrive. Zero: DefaultPollInterval (100 ms). At least 1 ms.
	PollInterval time.Duration
	// MinBackoff and MaxBackoff bound the wait between attempts to reach
	// the store again after it failed: it doubles from MinBackoff up to
	// MaxBackoff, with up to a quarter of it added at random so that a
	// fleet does not come back in step. Zero: DefaultMinBackoff (50 ms)
	// and DefaultMaxBackoff (5 s). MinBackoff <= MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// FailClosed refuses half-open probes while the store cannot be
	// reached, since the fleet's probe budget cannot be checked: the
	// member's refusals then carry ErrStoreUnavailable. Closed traffic
	// still flows and the local breaker still trips. Zero (false): a
	// member that cannot reach the store probes as a plain local breaker
	// (fail open), so a store outage changes nothing a caller sees.
	FailClosed bool
}

// resolved fills the zero fields of o with their defaults, from the
// breaker's settings where they depend on them, and checks every field.
func (o Options) resolved(permitted int, halfOpenFullWait time.Duration) (Options, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...))
	}
	switch c := o.Client.(type) {
	case nil:
		bad("Client is nil")
	case *redis.Client:
		if !c.Options().ContextTimeoutEnabled {
			bad("Client's ContextTimeoutEnabled is false: a store call's deadline would not bound its reads (set it in redis.Options)")
		}
	case *redis.ClusterClient:
		if !c.Options().ContextTimeoutEnabled {
			bad("Client's ContextTimeoutEnabled is false: a store call's deadline would not bound its reads (set it in redis.ClusterOptions)")
		}
	}
	if o.Key == "" || strings.ContainsAny(o.Key, "{}") || !validUTF8(o.Key) {
		bad("Key %q must be non-empty valid UTF-8 without '{' or '}'", o.Key)
	}
	if o.Member == "" {
		o.Member = randomName()
	}
	if o.Quorum == 0 {
		o.Quorum = DefaultQuorum
	}
	if o.Quorum < 1 || o.Quorum > 1000 {
		bad("Quorum %d is outside 1..1000", o.Quorum)
	}
	if o.Probes == 0 {
		o.Probes = permitted
	}
	if o.Probes < 1 || o.Probes > 127 {
		bad("Probes %d is outside 1..127", o.Probes)
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = halfOpenFullWait
	}
	if o.StoreTimeout == 0 {
		o.StoreTimeout = DefaultStoreTimeout
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"LeaseTTL", o.LeaseTTL}, {"StoreTimeout", o.StoreTimeout}, {"PollInterval", o.PollInterval},
		{"MinBackoff", o.MinBackoff}, {"MaxBackoff", o.MaxBackoff}} {
		if d.v < time.Millisecond {
			bad("%s %v is below 1ms", d.name, d.v)
		}
	}
	if o.MinBackoff > o.MaxBackoff {
		bad("MinBackoff %v is above MaxBackoff %v", o.MinBackoff, o.MaxBackoff)
	}
	return o, errors.Join(errs...)
}
