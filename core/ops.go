package core

import "github.com/redstream-go/redstream/internal/corekit"

// The engine-facing half of Limit (deciding in two steps, settling, carrying state across
// a limit change, leases) is unexported: the engines reach it through internal/coreops,
// which reads what init records here. Users step a key with StepState.
func init() {
	corekit.SetOps(&corekit.Ops[Limit, State, Decision, Carry, Algorithm]{
		Check:      Limit.checkState,
		Commit:     Limit.commitState,
		Ints:       Limit.ints,
		Same:       Limit.same,
		Settles:    Limit.settles,
		ChargeOf:   Limit.chargeOf,
		Settle:     Limit.settleState,
		CheckCarry: Limit.checkCarry,
		Seed:       Limit.seedState,
		SeedWords:  Algorithm.seed,
		Release:    releaseLease,
		Extend:     extendLease,
		CheckTime:  checkTime,
	})
}
