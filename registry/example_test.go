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
