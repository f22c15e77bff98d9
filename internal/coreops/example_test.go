package coreops_test

import (
	"fmt"

	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
)

// An engine settles a reservation in two steps: the Charge of the admitted decision, kept
// with the reservation, and SettleState on the key's state when the actual cost is known.
func ExampleSettleState() {
	alg, _ := core.Lookup("sliding")
	lim, err := alg.New(core.Params{Window: 60 * core.Second, Limit: 10})
	if err != nil {
		panic(err)
	}
	var (
		s core.State
		d core.Decision
	)
	now := int64(1_000_000_000)
	_ = lim.StepState(&s, now, 8, &d) // reserve 8
	c := coreops.ChargeOf(lim, now, 8, &d)
	fmt.Println("settles:", coreops.Settles(lim), "charge:", c.N, "units at", c.At)
	change, _ := coreops.SettleState(lim, &s, c, now+5*core.Second, 3) // the request used 3
	_ = coreops.CheckState(lim, &s, now+5*core.Second, 1, &d, new(coreops.Next))
	fmt.Println("change:", change, "remaining after one more:", d.Remaining)
	// Output:
	// settles: true charge: 8 units at 1000000000
	// change: -5 remaining after one more: 6
}
