package redisbackend

import (
	"fmt"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/internal/failure"
)

var scriptCarry = newScript("carry.lua")

// useCarry makes l carry state from the previous specs of opts (Options.Previous,
// Options.Carry): l then runs carry.lua, one key per call, with its keys followed by the
// keys of the previous specs. Nothing changes without previous specs or under CarryReset.
func (l *Limiter) useCarry(opts Options) error {
	if len(opts.Previous) == 0 || opts.Carry == core.CarryReset {
		return nil
	}
	if opts.Carry != core.CarryAsIs && opts.Carry != core.CarryProportional {
		return fmt.Errorf("redisbackend: %w: Options.Carry = %v", errInvalidConfig, opts.Carry)
	}
	if opts.JavaCompatible {
		return fmt.Errorf("redisbackend: %w: Options.Previous: a JavaCompatible limiter's keys carry no spec, so a change of spec keeps its state already", errInvalidConfig)
	}
	if len(opts.Previous) != len(l.specs) {
		return fmt.Errorf("redisbackend: %w: Options.Previous has %d specs for a limiter of %d", errInvalidConfig, len(opts.Previous), len(l.specs))
	}
	params := []string{l.margin} // ARGV[3]
	var old []string
	oldRoles := make([]string, 0, len(l.specs))
	for i, s := range l.specs {
		p, _ := s.Core() // validated by the constructor
		code, err := codeIn(scriptCarry, p.Name())
		if err != nil {
			return err
		}
		params = append(append(params, code), paddedParams(p)...)
		prev := opts.Previous[i]
		var q core.Limit
		if prev != (redstream.Spec{}) {
			if q, err = prev.Core(); err != nil {
				return failure.Prefixed("redisbackend", fmt.Errorf("%w (Options.Previous[%d])", err, i))
			}
		}
		if prev == (redstream.Spec{}) || coreops.Same(q, p) {
			// The same spec has the same key: its state goes on as it is.
			old = append(old, "", "0", "0", "0")
			oldRoles = append(oldRoles, "")
			continue
		}
		if err := coreops.CheckCarry(p, q, opts.Carry); err != nil {
			return failure.Prefixed("redisbackend", fmt.Errorf("%w (Options.Previous[%d])", err, i))
		}
		old = append(append(old, code), paddedParams(q)...)
		role := specRole(q)
		if len(l.specs) > 1 {
			role = limitRole(i, q)
		}
		oldRoles = append(oldRoles, role)
	}
	l.params = append(append(params, opts.Carry.String()), old...)
	l.script, l.multi, l.oldRoles = scriptCarry, true, oldRoles
	return nil
}

// callKeys returns the keys of one decision's script call for key: l.Keys, and when l
// carries state, the keys of the previous specs after them (a limit without a previous
// spec gets its own key there, which the script never reads). All share key's hash tag.
func (l *Limiter) callKeys(key string) []string {
	ks := l.Keys(key)
	if l.oldRoles == nil {
		return ks
	}
	for i, r := range l.oldRoles {
		if r == "" {
			r = l.roles[i]
		}
		ks = append(ks, redisKey(l.prefix, key, r))
	}
	return ks
}
