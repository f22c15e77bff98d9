// Package periodic delivers periodic messages to stream topics: schedules from cron
// expressions (seconds optional, in any IANA time zone) or fixed intervals, each tick sent
// once as a message to its topic, whatever the number of processes that run the schedule.
//
// Every process that adds a [Schedule] to its [Scheduler] delivers it; no process leads.
// Each tick is decided by one Lua script that, in one step on the Redis server, claims the
// tick (it records the latest decided tick in the schedule's state) and XADDs its message,
// so a tick is sent once across the processes, and a lost reply or a retry cannot send it
// again. The schedule's keys share its topic's hash slot: the script runs on Redis Cluster
// too. Ticks missed while Redis or every process was down follow the schedule's [Missed]
// policy ([MissedSkip], [MissedOne], [MissedAll], bounded by Schedule.MaxCatchUp).
//
// Each tick's message is a stream entry of the wire contract (stream/WIRE.md): key
// "<name>@<tick in ms since the Unix epoch>", the schedule's Tag and Body, and the headers
// "redstream-schedule" (the name) and "redstream-tick" (the tick, RFC 3339 in UTC to the
// millisecond). Any stream consumer of the topic handles it.
//
// [Scheduler.List], [Scheduler.Pause], [Scheduler.Resume] and [Scheduler.Remove] administer
// the registered schedules of any process, as does the redstream command's "periodic"
// command. docs/periodic.md is the guide.
package periodic
