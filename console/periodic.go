package console

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redstream-go/redstream/stream/periodic"
)

// The schedules page lists the periodic schedules of package stream/periodic registered on
// the server (by any process), with pause, resume and remove actions, as the redstream
// command's "periodic" command does.

// scheduleRow is one schedule on the schedules page.
type scheduleRow struct {
	periodic.Info
	When string // the cron expression (with its time zone) or the interval
}

// schedulesPage is the data of periodic.html.
type schedulesPage struct {
	Rows   []scheduleRow
	Notice string
	Now    time.Time
}

// scheduleActions are the actions of the schedules page: what each does, as the notice
// after it says.
var scheduleActions = map[string]string{"pause": "paused", "resume": "resumed", "remove": "removed"}

// pagePeriodic serves the schedules page (GET /periodic).
func (c *Console) pagePeriodic(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.call(r.Context())
	infos, err := c.periodic.List(ctx, "")
	cancel()
	if err != nil {
		c.redisFail(w, r, "list the schedules", err)
		return
	}
	p := schedulesPage{Now: time.Now()}
	for _, i := range infos {
		when := "every " + i.Every.String()
		if i.Cron != "" {
			when = i.Cron
			if i.TimeZone != "" {
				when += " (" + i.TimeZone + ")"
			}
		}
		p.Rows = append(p.Rows, scheduleRow{Info: i, When: when})
	}
	q := r.URL.Query()
	if done, ok := scheduleActions[q.Get("done")]; ok {
		p.Notice = fmt.Sprintf("Schedule %q of topic %q %s.", cutDisplay(q.Get("name"), 200), cutDisplay(q.Get("t"), 200), done)
	}
	c.render(w, r, http.StatusOK, "periodic.html", []crumb{{"topics", c.link("/")}, {"schedules", c.link("/periodic")}}, p)
}

// doPeriodic pauses, resumes or removes a schedule (POST /periodic/action: op, t, name),
// then shows the schedules page (POST-redirect-GET).
func (c *Console) doPeriodic(w http.ResponseWriter, r *http.Request) {
	op, topic, name := r.PostForm.Get("op"), r.PostForm.Get("t"), r.PostForm.Get("name")
	if _, ok := scheduleActions[op]; !ok {
		c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("unknown schedule action %q, want pause, resume or remove", cutDisplay(op, 64)))
		return
	}
	if err := checkTopic(topic); err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if name == "" || len(name) > maxParam {
		c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("missing or too long parameter \"name\" (at most %d bytes)", maxParam))
		return
	}
	ctx, cancel := c.call(r.Context())
	var err error
	switch op {
	case "pause":
		err = c.periodic.Pause(ctx, topic, name)
	case "resume":
		err = c.periodic.Resume(ctx, topic, name)
	default:
		err = c.periodic.Remove(ctx, topic, name)
	}
	cancel()
	if errors.Is(err, periodic.ErrNotFound) {
		c.fail(w, r, http.StatusNotFound, fmt.Sprintf("no schedule %q is registered for topic %q", cutDisplay(name, 200), cutDisplay(topic, 200)))
		return
	}
	if err != nil {
		c.redisFail(w, r, op+" the schedule", err)
		return
	}
	c.log.Info("console: "+scheduleActions[op]+" a schedule", "topic", topic, "schedule", name)
	http.Redirect(w, r, buildLink(c.prefix, "/periodic", "done", op, "t", topic, "name", name), http.StatusSeeOther)
}
