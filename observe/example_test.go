package observe_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/observe"
)

// What an exporter reads: every series of every breaker, with transitions
// told apart by reason because the breaker's listener counts them.
func Example() {
	var transitions observe.Transitions
	b, err := core.New(core.Config{
		Name:                "payments",
		ConsecutiveFailures: 1,
		OpenDuration:        5 * time.Second,
		CollectMetrics:      true,
		Clock:               core.NewManualClock(0),
		OnStateChange:       transitions.Listener(nil),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, _ := b.Allow()
	b.Done(p, errors.New("connection refused"))
	_, err = b.Allow() // refused: open

	src, _ := observe.Breakers(b)
	r, _ := observe.NewReader(src, &transitions)
	err = r.Read(func(s observe.Sample) {
		s.Each(func(m *observe.Metric, labels []string, v observe.Point) {
			if v.Count > 0 {
				fmt.Println(s.Name, m.Name, labels, v.Count)
			}
		})
	})
	fmt.Println(err)
	// Output:
	// payments state [open] 1
	// payments calls [failed] 1
	// payments permitted_calls [] 1
	// payments not_permitted_calls [open] 1
	// payments transitions [closed open consecutive_failures] 1
	// <nil>
}
