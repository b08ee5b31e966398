package atomicring_test

import (
	"fmt"

	"github.com/casbreaker/casbreaker/window/atomicring"
)

func Example() {
	r, err := atomicring.New(3) // the last 3 calls
	if err != nil {
		panic(err)
	}
	const gen = 1 // the breaker generation the calls were admitted under

	r.Record(gen, true, false) // a failure
	r.Record(gen, false, true) // a slow success
	r.Record(gen, false, false)
	c, _ := r.Record(gen, false, false) // pushes the failure out
	fmt.Printf("%+v\n", c)

	_, ok := r.Record(gen-1, true, false) // an older generation: stale
	fmt.Println(ok, r.Snapshot(gen) == c)

	c, _ = r.Record(gen+1, true, false) // a newer one starts empty
	fmt.Printf("%+v\n", c)
	// Output:
	// {Calls:3 Failures:0 SlowCalls:1 SlowFailures:0}
	// false true
	// {Calls:1 Failures:1 SlowCalls:0 SlowFailures:0}
}
