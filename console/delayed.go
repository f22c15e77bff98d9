package console

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// The scheduled messages of a topic (WithDelay, WithDeliverAt): listed in due order from the
// topic's schedule (a sorted set of ids by due time) and their encoded entries (a hash), both
// in the stream's slot (streamwire.DelayedKeys); cancelled through Producer.CancelScheduled,
// or delivered now: due at once, then moved into the stream by Producer.MoveDue, as a
// consumer's mover would at its next poll.

// delayedRow is one scheduled message.
type delayedRow struct {
	ID      string
	Due     time.Time
	Key     string
	Body    string // decoded, cut at 200 bytes
	BodyCut int    // bytes cut
	Fields  int    // fields of the entry, headers included
	Err     string // the entry could not be read
	Overdue bool   // due already: a mover has not run since
}

// delayedPage is the data of a topic's scheduled messages page.
type delayedPage struct {
	Topic  string
	Total  int64
	Rows   []delayedRow
	Offset int
	Next   int // offset of the next page; 0 at the end
	Notice string
}

// delayedActions are the actions of the page, with the words the notice uses.
var delayedActions = map[string]string{"cancel": "cancelled", "now": "delivered now"}

// scheduleIDRE is the form of a scheduled message's id (24 hex digits, stream.scheduleID).
var scheduleIDRE = regexp.MustCompile(`^[0-9a-f]{24}$`)

// scheduled reads n scheduled messages of topic from the offset-th in due order.
func (c *Console) scheduled(ctx context.Context, topic string, offset, n int) (delayedPage, error) {
	p := delayedPage{Topic: topic, Offset: offset}
	sched, msgs := streamwire.DelayedKeys(topic)
	cl := c.client
	ctx, cancel := c.call(ctx)
	defer cancel()
	res := cl.DoMulti(ctx,
		cl.B().Zcard().Key(sched).Build(),
		cl.B().Zrange().Key(sched).Min(strconv.Itoa(offset)).Max(strconv.Itoa(offset+n)).Withscores().Build())
	var err error
	if p.Total, err = res[0].AsInt64(); err != nil {
		return p, err
	}
	zs, err := res[1].AsZScores()
	if err != nil {
		return p, err
	}
	if len(zs) > n {
		zs, p.Next = zs[:n], offset+n
	}
	if len(zs) == 0 {
		return p, nil
	}
	ids := make([]string, len(zs))
	for i, z := range zs {
		ids[i] = z.Member
	}
	vals, err := cl.Do(ctx, cl.B().Hmget().Key(msgs).Field(ids...).Build()).ToArray()
	if err != nil {
		return p, err
	}
	now := time.Now()
	for i, z := range zs {
		row := delayedRow{ID: z.Member, Due: time.UnixMilli(int64(z.Score)).UTC()}
		row.Overdue = !row.Due.After(now)
		if i >= len(vals) {
			row.Err = "no entry"
		} else if enc, err := vals[i].ToString(); err != nil {
			row.Err = "no entry (moved or cancelled meanwhile)"
		} else {
			c.fillDelayed(&row, enc)
		}
		p.Rows = append(p.Rows, row)
	}
	return p, nil
}

// fillDelayed decodes a scheduled message's encoded entry into row.
func (c *Console) fillDelayed(row *delayedRow, enc string) {
	fields, err := streamwire.DecodeFields(enc)
	if err != nil {
		row.Err = err.Error()
		return
	}
	row.Fields = len(fields) / 2
	var bodyEnc, body string
	for i := 0; i+1 < len(fields); i += 2 {
		switch fields[i] {
		case streamwire.FieldKey:
			row.Key, _ = cutString(fields[i+1], 200)
		case streamwire.FieldEnc:
			bodyEnc = fields[i+1]
		case streamwire.FieldBody:
			body = fields[i+1]
		}
	}
	js, err := streamwire.DecodeBody(bodyEnc, body, c.maxBody)
	if err != nil {
		row.Err = err.Error()
		return
	}
	row.Body, row.BodyCut = cutString(string(js), 200)
}

func (c *Console) pageDelayed(w http.ResponseWriter, r *http.Request) {
	topic, err := param(r, "t", true)
	if err == nil {
		err = checkTopic(topic)
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	offset := 0
	if v := r.URL.Query().Get("offset"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 || offset > 1<<30 {
			c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("parameter \"offset\": %q is not a position in the schedule", cutDisplay(v, 64)))
			return
		}
	}
	p, err := c.scheduled(r.Context(), topic, offset, c.pageSizeParam(r))
	if err != nil {
		c.redisFail(w, r, "list scheduled messages", err)
		return
	}
	q := r.URL.Query()
	if done, ok := delayedActions[q.Get("done")]; ok {
		p.Notice = fmt.Sprintf("%s of %s selected scheduled messages %s.", cutDisplay(q.Get("n"), 8), cutDisplay(q.Get("of"), 8), done)
	}
	crumbs := append(c.topicCrumbs(topic), crumb{"scheduled", buildLink(c.prefix, "/delayed", "t", topic)})
	c.render(w, r, http.StatusOK, "delayed.html", crumbs, p)
}

// doDelayed cancels or delivers now the selected scheduled messages (POST /delayed/action:
// op, t, id...), then shows the page again (POST-redirect-GET).
func (c *Console) doDelayed(w http.ResponseWriter, r *http.Request) {
	op, topic, ids := r.PostForm.Get("op"), r.PostForm.Get("t"), r.PostForm["id"]
	if _, ok := delayedActions[op]; !ok {
		c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("unknown action %q, want cancel or now", cutDisplay(op, 64)))
		return
	}
	if err := checkTopic(topic); err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if len(ids) == 0 || len(ids) > MaxPageSize {
		c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%d scheduled messages selected, want 1 to %d", len(ids), MaxPageSize))
		return
	}
	for _, id := range ids {
		if !scheduleIDRE.MatchString(id) {
			c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a scheduled message's id", cutDisplay(id, 64)))
			return
		}
	}
	ctx, cancel := c.call(r.Context())
	defer cancel()
	n, err := 0, error(nil)
	if op == "cancel" {
		for _, id := range ids {
			var ok bool
			if ok, err = c.producer.CancelScheduled(ctx, topic, id); err != nil {
				break
			}
			if ok {
				n++
			}
		}
	} else {
		n, err = c.deliverNow(ctx, topic, ids)
	}
	if err != nil {
		c.redisFail(w, r, delayedActions[op]+" scheduled messages", err)
		return
	}
	c.log.Info("console: scheduled messages "+delayedActions[op], "topic", topic, "done", n, "selected", len(ids))
	http.Redirect(w, r, buildLink(c.prefix, "/delayed", "t", topic, "done", op, "n", strconv.Itoa(n), "of", strconv.Itoa(len(ids))), http.StatusSeeOther)
}

// dueNow makes the scheduled messages of KEYS[1] named in ARGV due at once (score 0, so
// they move first), leaving ids no longer scheduled alone, and returns how many it changed.
var dueNow = rueidis.NewLuaScript(`local n = 0
for _, id in ipairs(ARGV) do
  n = n + redis.call('ZADD', KEYS[1], 'XX', 'CH', 0, id)
end
return n`)

// deliverNow makes ids due at once and moves every due message of topic into its stream.
func (c *Console) deliverNow(ctx context.Context, topic string, ids []string) (int, error) {
	sched, _ := streamwire.DelayedKeys(topic)
	n, err := dueNow.Exec(ctx, c.client, []string{sched}, ids).AsInt64()
	if err != nil {
		return 0, err
	}
	if _, err := c.producer.MoveDue(ctx, topic); err != nil {
		return int(n), err
	}
	return int(n), nil
}
