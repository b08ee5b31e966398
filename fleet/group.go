package fleet

import (
	"errors"
	"sync"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/observe"
)

// ErrGroupClosed is what Group.Get returns after Group.Close.
var ErrGroupClosed = errors.New("fleet: Group used after Close")

// Group is a fleet per key: one Member per key, made on the key's first
// Get from one template, each a fleet of its own on the store. Every
// member has its own background goroutine and its own subscription (one
// connection of the client's pool), so a Group suits tens of keys, not
// thousands. Make one with NewGroup; a zero Group's Get panics naming
// NewGroup. Safe for concurrent use.
type Group struct {
	cfg     core.Config
	o       Options
	members sync.Map // key -> *Member
	mu      sync.Mutex
	closed  bool // guarded by mu
}

// NewGroup returns a Group whose members are New(cfg, o) with, for key,
// Options.Key o.Key + ":" + key and Config.Name cfg.Name + "/" + key
// (key alone when cfg.Name is empty). It returns the errors New would
// return for cfg and o (o.Key is the prefix, required like a Member's Key)
// and makes no member and no store call.
func NewGroup(cfg core.Config, o Options) (*Group, error) {
	s, err := cfg.Validate()
	_, oerr := o.resolved(s.PermittedCallsInHalfOpen, s.HalfOpenFullWait)
	if err = errors.Join(err, oerr); err != nil {
		return nil, err
	}
	return &Group{cfg: cfg, o: o}, nil
}

// Get returns the member of key, making it on the key's first Get. It
// allocates nothing and takes no lock for a key it has made. It returns
// New's errors for a key New refuses (one with '{' or '}', or not valid
// UTF-8) and ErrGroupClosed after Close.
func (g *Group) Get(key string) (*Member, error) {
	g.mustBeNew()
	if m, ok := g.members.Load(key); ok {
		return m.(*Member), nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, ErrGroupClosed
	}
	if m, ok := g.members.Load(key); ok {
		return m.(*Member), nil
	}
	cfg, o := g.cfg, g.o
	o.Key += ":" + key
	if cfg.Name != "" {
		cfg.Name += "/" + key
	} else {
		cfg.Name = key
	}
	m, err := New(cfg, o)
	if err != nil {
		return nil, err
	}
	g.members.Store(key, m)
	return m, nil
}

// Source returns an observe.Source of every member the group has made at
// each read (in no fixed order; members made while a read runs may be
// missed or read), for prombreaker or otelbreaker: each member's breaker
// series and fleet series, under its breaker's name (Config.Name + "/" +
// key), which no other member of the group shares. A zero or nil Group
// panics naming NewGroup.
func (g *Group) Source() observe.Source {
	g.mustBeNew()
	return func(yield func(observe.Breaker) bool) {
		g.members.Range(func(_, m any) bool { return yield(m.(*Member)) })
	}
}

// mustBeNew panics naming NewGroup for a zero or nil Group.
func (g *Group) mustBeNew() {
	if g == nil || g.o.Client == nil {
		panic("fleet: Group used without NewGroup: make one with fleet.NewGroup")
	}
}

// Close closes every member (Member.Close) and makes later Gets of new
// keys fail with ErrGroupClosed; members already made keep working as
// local breakers. It returns nil; a second Close does nothing more.
func (g *Group) Close() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.members.Range(func(_, m any) bool {
		m.(*Member).Close()
		return true
	})
	return nil
}
