package registry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/registry"
)

// One breaker per tenant from one template, bounded, with idle ones
// dropped as new tenants arrive.
func Example() {
	reg, err := registry.New(registry.Options[string]{
		Config:      core.Config{Name: "billing", ConsecutiveFailures: 3, OpenDuration: 10 * time.Second},
		MaxBreakers: 10_000,
		IdleAfter:   10 * time.Minute,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// New tenants drop idle breakers as they come; to drop them when no
	// new tenant comes: go func() { for range time.Tick(time.Minute) { reg.EvictIdle() } }()

	charge := func(ctx context.Context, tenant string) error {
		b, err := reg.Get(tenant)
		if err != nil {
			return err // registry.ErrFull: every breaker is busy or open
		}
		_, err = core.Do(ctx, b, func(context.Context) (struct{}, error) {
			if tenant == "acme" {
				return struct{}{}, errors.New("payment backend down")
			}
			return struct{}{}, nil
		})
		return err
	}
	for range 4 {
		err = charge(context.Background(), "acme")
	}
	fmt.Println(errors.Is(err, core.ErrOpen), core.RetryAfterOf(err) > 9*time.Second)
	fmt.Println(charge(context.Background(), "globex"))
	for tenant, b := range reg.All() {
		if tenant == "acme" {
			fmt.Println(b.Settings().Name, b.State())
		}
	}
	// Output:
	// true true
	// <nil>
	// billing/acme open
}

// At most a third of the hosts ejected at once: when a fault on the
// client's side fails every host, the first trips open and the rest stay
// closed, each refused trip a notification with reason capped, so calls
// still reach the hosts that may be fine.
func ExampleOptions_maxOpenPercent() {
	reg, err := registry.New(registry.Options[string]{
		Config: core.Config{Name: "hosts", ConsecutiveFailures: 1, OnStateChange: func(t core.Transition) {
			fmt.Println(t.Name, t.From, "->", t.To, t.Reason)
		}},
		MaxOpenPercent: 34,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, h := range []string{"a", "b", "c"} {
		b, err := reg.Get(h)
		if err != nil {
			fmt.Println(err)
			return
		}
		if p, err := b.Allow(); err == nil {
			b.Done(p, errors.New("TLS handshake failed"))
		}
	}
	held, allowed := reg.OpenShare()
	fmt.Println(held, "of", allowed, "ejected")
	// Output:
	// hosts/a closed -> open consecutive-failures
	// hosts/b closed -> closed capped
	// hosts/c closed -> closed capped
	// 1 of 1 ejected
}
