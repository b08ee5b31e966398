package registry_test

import (
	"math"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/registry"
)

// A key that could never be found again (not equal to itself, or not
// comparable) gets an error that names it, and no breaker: it cannot fill
// a bounded registry.
func TestInvalidKey(t *testing.T) {
	cfg := core.Config{ConsecutiveFailures: 1, Clock: core.NewManualClock(0)}
	floats, err := registry.New(registry.Options[float64]{Config: cfg, MaxBreakers: 1})
	require.NoError(t, err)
	for range 3 {
		b, err := floats.Get(math.NaN())
		require.ErrorIs(t, err, registry.ErrInvalidKey)
		require.ErrorContains(t, err, "key NaN is not equal to itself")
		require.Nil(t, b)
		b, ok := floats.Lookup(math.NaN())
		require.False(t, ok)
		require.Nil(t, b)
	}
	require.Zero(t, floats.Len())
	b, err := floats.Get(1.5)
	require.NoError(t, err)
	require.NotNil(t, b)

	type pair struct {
		Host string
		W    float64
	}
	pairs, err := registry.New(registry.Options[pair]{Config: cfg})
	require.NoError(t, err)
	_, err = pairs.Get(pair{"a", math.NaN()})
	require.ErrorIs(t, err, registry.ErrInvalidKey)
	require.Zero(t, pairs.Len())

	anys, err := registry.New(registry.Options[any]{Config: cfg, IdleAfter: 1})
	require.NoError(t, err)
	for _, key := range []any{[]int{1}, map[string]int{}, struct{ F any }{func() {}}, [1]any{[]byte("x")}, math.NaN()} {
		b, err := anys.Get(key)
		require.ErrorIs(t, err, registry.ErrInvalidKey, "%#v", key)
		require.Nil(t, b)
		b, ok := anys.Lookup(key) // no panic in the map's comparison either
		require.False(t, ok, "%#v", key)
		require.Nil(t, b)
	}
	require.Zero(t, anys.Len())
	for _, key := range []any{1, "a", struct{ F any }{2}, nil} {
		b, err := anys.Get(key)
		require.NoError(t, err)
		again, err := anys.Get(key)
		require.NoError(t, err)
		require.Same(t, b, again)
		found, ok := anys.Lookup(key)
		require.True(t, ok)
		require.Same(t, b, found)
	}
	require.Equal(t, 4, anys.Len())
}

// A key whose text is not valid UTF-8 (a host "%ff.example" decodes to)
// gets a breaker named by that text quoted, which core.New takes and any
// metrics label may hold; a Name function that returns such a name makes
// Get fail with an error, itself valid UTF-8, naming it.
func TestKeyNotUTF8IsNamedQuoted(t *testing.T) {
	cfg := core.Config{ConsecutiveFailures: 1, Clock: core.NewManualClock(0)}
	hosts, err := registry.New(registry.Options[string]{Config: cfg})
	require.NoError(t, err)
	b, err := hosts.Get("\xff.example")
	require.NoError(t, err)
	require.Equal(t, `"\xff.example"`, b.Settings().Name)
	again, err := hosts.Get("\xff.example")
	require.NoError(t, err)
	require.Same(t, b, again)

	cfg.Name = "api"
	prefixed, err := registry.New(registry.Options[string]{Config: cfg})
	require.NoError(t, err)
	b, err = prefixed.Get("\xfe")
	require.NoError(t, err)
	require.Equal(t, `api/"\xfe"`, b.Settings().Name)

	raw, err := registry.New(registry.Options[string]{Config: cfg, Name: func(k string) string { return k }})
	require.NoError(t, err)
	_, err = raw.Get("\xff.example")
	require.ErrorIs(t, err, core.ErrInvalidConfig)
	require.True(t, utf8.ValidString(err.Error()), "%q", err.Error())
	require.ErrorContains(t, err, `breaker for "\xff.example"`)
	require.Zero(t, raw.Len())
}

// The Name function is user code: it runs outside the registry's mutex,
// so one that calls back into the registry (here Get of another key, with
// eviction on) does not wait forever on its own Get's mutex; a panic in
// it leaves the registry as it was.
func TestNameRunsOutsideTheMutex(t *testing.T) {
	var r *registry.Registry[string]
	var locked []bool
	r, err := registry.New(registry.Options[string]{
		Config: core.Config{ConsecutiveFailures: 1, Clock: core.NewManualClock(0)}, MaxBreakers: 4, IdleAfter: time.Minute,
		Name: func(k string) string {
			locked = append(locked, registry.Locked(r))
			switch {
			case k == "bad":
				panic("bad name")
			case locked[len(locked)-1]:
				// Get would wait forever: the assertion below fails instead.
			case k == "child":
				_, err := r.Get("parent")
				require.NoError(t, err)
			}
			return k
		},
	})
	require.NoError(t, err)
	require.Panics(t, func() { _, _ = r.Get("bad") })
	child, err := r.Get("child")
	require.NoError(t, err)
	require.Equal(t, "child", child.Settings().Name)
	require.Equal(t, []bool{false, false, false}, locked)
	require.Equal(t, 2, r.Len())
	require.False(t, registry.Locked(r))
}
