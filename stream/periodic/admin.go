package periodic

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/streamwire"
)

// Info is one registered schedule, as List reads it.
type Info struct {
	// Schedule is the definition last registered (by Add in any process), as given.
	Schedule
	// Paused reports whether the schedule is paused (Pause): its ticks pass unsent.
	Paused bool
	// Last is the latest tick decided (sent, skipped or passed while paused); zero when
	// none was.
	Last time.Time
	// Next is the schedule's first tick after the later of Last and now; zero when the
	// definition cannot be read or has no more ticks.
	Next time.Time
	// Sent counts the ticks sent, CaughtUp those of them sent late (missed ticks the policy
	// sent), and Skipped the missed ticks the policy dropped, since the schedule was first
	// registered (or registered again after Remove).
	Sent, CaughtUp, Skipped int64
}

// List returns the registered schedules of topic, or of every topic when topic is "", by
// topic and name. Each Redis call has Options.Timeout (or ctx's earlier deadline).
func (s *Scheduler) List(ctx context.Context, topic string) ([]Info, error) {
	var keys []string
	if topic != "" {
		key, err := s.streamKey(topic)
		if err != nil {
			return nil, err
		}
		keys = []string{key}
	} else {
		cctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		all, err := s.client.Do(cctx, s.client.B().Smembers().Key(streamwire.PeriodicIndexKey).Build()).AsStrSlice()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("periodic: List: %w", err)
		}
		keys = all
		sort.Strings(keys)
	}
	var out []Info
	for _, key := range keys {
		infos, err := s.listStream(ctx, key)
		if err != nil {
			return nil, err
		}
		out = append(out, infos...)
	}
	return out, nil
}

// listStream returns the schedules registered on one stream key, by name.
func (s *Scheduler) listStream(ctx context.Context, key string) ([]Info, error) {
	schedules, _ := streamwire.PeriodicKeys(key, "")
	cctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	defs, err := s.client.Do(cctx, s.client.B().Hgetall().Key(schedules).Build()).AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("periodic: List %s: %w", key, err)
	}
	names := make([]string, 0, len(defs))
	for name := range defs {
		names = append(names, name)
	}
	sort.Strings(names)
	cmds := make(rueidis.Commands, 0, len(names))
	for _, name := range names {
		_, state := streamwire.PeriodicKeys(key, name)
		cmds = append(cmds, s.client.B().Hmget().Key(state).Field("last", "paused", "sent", "caught_up", "skipped").Build())
	}
	out := make([]Info, 0, len(names))
	for i, r := range s.client.DoMulti(cctx, cmds...) {
		vals, err := r.ToArray()
		if err != nil {
			return nil, fmt.Errorf("periodic: List %s %q: %w", key, names[i], err)
		}
		out = append(out, newInfo(names[i], defs[names[i]], vals))
	}
	return out, nil
}

// newInfo returns the Info of schedule name from its definition and its state's values
// (last, paused, sent, caught_up, skipped).
func newInfo(name, def string, vals []rueidis.RedisMessage) Info {
	var info Info
	if err := json.Unmarshal([]byte(def), &info.Schedule); err != nil {
		info.Schedule = Schedule{Name: name}
	}
	num := func(i int) int64 {
		if i >= len(vals) {
			return 0
		}
		v, _ := vals[i].ToString()
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	if ms := num(0); ms > 0 {
		info.Last = time.UnixMilli(ms)
	}
	info.Paused = num(1) == 1
	info.Sent, info.CaughtUp, info.Skipped = num(2), num(3), num(4)
	if c, err := compile(info.Schedule); err == nil {
		info.Next = c.series.next(maxTime(info.Last, time.Now()))
	}
	return info
}

// Pause pauses the schedule name of topic in every process: its ticks pass unsent (they are
// not missed ticks: Resume does not catch them up) until Resume. It returns ErrNotFound when
// the schedule is not registered.
func (s *Scheduler) Pause(ctx context.Context, topic, name string) error {
	return s.admin(ctx, "pause", topic, name)
}

// Resume resumes a paused schedule: its next tick is sent. It returns ErrNotFound when the
// schedule is not registered.
func (s *Scheduler) Resume(ctx context.Context, topic, name string) error {
	return s.admin(ctx, "resume", topic, name)
}

// Remove deletes the schedule name of topic: its definition and state. Every process that
// delivers it stops at its next tick (and logs it), until some process adds it again. It
// returns ErrNotFound when the schedule is not registered.
func (s *Scheduler) Remove(ctx context.Context, topic, name string) error {
	return s.admin(ctx, "remove", topic, name)
}

// admin runs admin.lua's op on one schedule.
func (s *Scheduler) admin(ctx context.Context, op, topic, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	key, err := s.streamKey(topic)
	if err != nil {
		return err
	}
	schedules, state := streamwire.PeriodicKeys(key, name)
	cctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	n, err := adminScript.Exec(cctx, s.client, []string{state, schedules}, []string{name, op}).AsInt64()
	if err != nil {
		return fmt.Errorf("periodic: %s %q: %w", op, name, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q of topic %q", ErrNotFound, name, topic)
	}
	if op == "remove" {
		// The last schedule of the topic gone: the topic leaves the index (a key of another
		// slot, so not in the script). An Add of the topic racing this one may be left out
		// of the index until the next Add; List(ctx, topic) finds it all the same.
		if left, err := s.client.Do(cctx, s.client.B().Hlen().Key(schedules).Build()).AsInt64(); err == nil && left == 0 {
			_ = s.client.Do(cctx, s.client.B().Srem().Key(streamwire.PeriodicIndexKey).Member(key).Build()).Error()
		}
	}
	return nil
}
