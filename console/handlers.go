package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

// page is what every template gets.
type page struct {
	Title    string
	Base     string // the prefix
	ReadOnly bool
	Limits   bool // limiters are configured: the header links the limits page
	CSRF     string
	Crumbs   []crumb
	Data     any
	// Refresh reloads the page every so many seconds (the refresh parameter of a GET,
	// 2 to 3600; 0: never).
	Refresh int
}

type crumb struct{ Name, Href string }

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, crumbs []crumb, data any) {
	p := page{Title: c.title, Base: c.prefix, ReadOnly: c.readOnly, Limits: len(c.limiters) > 0, Crumbs: crumbs, Data: data}
	if n, err := strconv.Atoi(r.URL.Query().Get("refresh")); err == nil && r.Method == http.MethodGet && status == http.StatusOK {
		p.Refresh = min(max(n, 2), 3600)
	}
	if !c.readOnly {
		p.CSRF = c.csrfToken(w, r)
	}
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, name, p); err != nil {
		c.log.Error("console: render page", "page", name, "error", err)
		http.Error(w, "console: page failed to render", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// fail renders an error page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error.html", nil, struct {
		Status int
		Text   string
		Msg    string
	}{status, http.StatusText(status), msg})
}

// redisFail renders a Redis error (502, or 504 on a timeout) and logs it.
func (c *Console) redisFail(w http.ResponseWriter, r *http.Request, what string, err error) {
	c.log.Warn("console: redis call failed", "op", what, "error", err)
	status := http.StatusBadGateway
	if errors.Is(err, context.DeadlineExceeded) {
		status = http.StatusGatewayTimeout
	}
	c.fail(w, r, status, fmt.Sprintf("%s: %v", what, err))
}

func (c *Console) topicCrumbs(topic string) []crumb {
	return []crumb{{"topics", c.link("/")}, {topic, buildLink(c.prefix, "/topic", "t", topic)}}
}

// maxParam is the longest topic, group or filter parameter accepted.
const maxParam = 4096

// param returns query parameter name, or an error when it is too long or (when required)
// empty.
func param(r *http.Request, name string, required bool) (string, error) {
	v := r.URL.Query().Get(name)
	if len(v) > maxParam {
		return "", fmt.Errorf("parameter %q longer than %d bytes", name, maxParam)
	}
	if required && v == "" {
		return "", fmt.Errorf("missing parameter %q", name)
	}
	return v, nil
}

// pageSizeParam returns the n parameter clamped to 1..PageSize (default PageSize).
func (c *Console) pageSizeParam(r *http.Request) int {
	n, err := strconv.Atoi(r.URL.Query().Get("n"))
	if err != nil || n <= 0 || n > c.pageSize {
		return c.pageSize
	}
	return n
}

// afterParam returns the after parameter: "" or an entry id.
func afterParam(r *http.Request) (string, error) {
	a := r.URL.Query().Get("after")
	if a != "" && !validID(a) {
		return "", fmt.Errorf("parameter \"after\": %q is not a stream entry id", a)
	}
	return a, nil
}

// topicsPage is the data of the topics page.
type topicsPage struct {
	Topics    []topicSummary
	Total     int
	Next      string
	Truncated bool
	Explicit  bool
	MaxTopics int
	Trim      stream.TrimConfig
	Sum       topicSummary  // the listed topics' totals (Lag: the largest)
	Rows      []overviewRow // Topics with each topic's partitions and levels folded under a sum
	Facts     redisFacts
	FactsErr  string
}

func (c *Console) pageTopics(w http.ResponseWriter, r *http.Request) {
	d, err := c.discover(r.Context())
	if err != nil {
		c.redisFail(w, r, "discover topics", err)
		return
	}
	after, err := param(r, "after", false)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	n := c.pageSizeParam(r)
	i := sort.SearchStrings(d.Topics, after)
	if i < len(d.Topics) && d.Topics[i] == after {
		i++
	}
	if after == "" {
		i = 0
	}
	names := d.Topics[i:]
	tp := topicsPage{Total: len(d.Topics), Truncated: d.Truncated, Explicit: c.topics != nil, MaxTopics: c.maxTopics, Trim: c.cfg.Trim}
	if len(names) > n {
		names = names[:n]
		tp.Next = names[n-1]
	}
	tp.Topics = c.summaries(r.Context(), names)
	for _, t := range tp.Topics {
		tp.Sum.Length += t.Length
		tp.Sum.Consumers += t.Consumers
		tp.Sum.Idle += t.Idle
		tp.Sum.Pending += t.Pending
		tp.Sum.Delayed += t.Delayed
		tp.Sum.DeadLetters += t.DeadLetters
		if t.Lag < 0 || tp.Sum.Lag < 0 {
			tp.Sum.Lag = -1
		} else {
			tp.Sum.Lag = max(tp.Sum.Lag, t.Lag)
		}
	}
	tp.Rows = foldParts(tp.Topics)
	if f, err := c.facts(r.Context()); err != nil {
		tp.FactsErr = err.Error()
	} else {
		tp.Facts = f
	}
	c.render(w, r, http.StatusOK, "topics.html", []crumb{{"topics", c.link("/")}}, tp)
}

// topicPage is the data of a topic's page.
type topicPage struct {
	topicData
	Trim       stream.TrimConfig
	DeadLetter stream.DeadLetterConfig
}

func (c *Console) pageTopic(w http.ResponseWriter, r *http.Request) {
	topic, err := param(r, "t", true)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ti, err := c.topicInfo(r.Context(), topic)
	if err != nil {
		c.redisFail(w, r, "read topic", err)
		return
	}
	if !ti.Exists && ti.DeadLetters == 0 {
		c.fail(w, r, http.StatusNotFound, fmt.Sprintf("no topic %q: neither its stream nor its dead-letter stream exists", topic))
		return
	}
	c.render(w, r, http.StatusOK, "topic.html", c.topicCrumbs(topic),
		topicPage{topicData: ti, Trim: c.cfg.Trim, DeadLetter: c.cfg.DeadLetter})
}

func (c *Console) pageGroup(w http.ResponseWriter, r *http.Request) {
	topic, err := param(r, "t", true)
	var group, after string
	if err == nil {
		group, err = param(r, "g", true)
	}
	if err == nil {
		after, err = afterParam(r)
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	gp, err := c.groupPage(r.Context(), topic, group, after, c.pageSizeParam(r))
	switch {
	case errors.Is(err, errNoGroup) || (err != nil && isNoSuchKey(err)):
		c.fail(w, r, http.StatusNotFound, fmt.Sprintf("no consumer group %q on topic %q", group, topic))
		return
	case err != nil:
		c.redisFail(w, r, "read group", err)
		return
	}
	crumbs := append(c.topicCrumbs(topic), crumb{"group " + group, buildLink(c.prefix, "/group", "t", topic, "g", group)})
	c.render(w, r, http.StatusOK, "group.html", crumbs, gp)
}

func (c *Console) pageDeadLetters(w http.ResponseWriter, r *http.Request) {
	topic, err := param(r, "t", true)
	var f deadLetterFilter
	var after string
	if err == nil {
		f, after, err = filterParams(r, true)
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if err := checkTopic(topic); err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	p, err := c.listDeadLetters(r.Context(), topic, f, after, c.pageSizeParam(r))
	if err != nil {
		c.redisFail(w, r, "list dead letters", err)
		return
	}
	crumbs := append(c.topicCrumbs(topic), crumb{"dead letters", buildLink(c.prefix, "/dlq", "t", topic)})
	c.render(w, r, http.StatusOK, "dlq.html", crumbs, p)
}

// pageEntries lists a topic's entries, searched by key, body and time range.
func (c *Console) pageEntries(w http.ResponseWriter, r *http.Request) {
	topic, err := param(r, "t", true)
	var f deadLetterFilter
	var after string
	if err == nil {
		f, after, err = filterParams(r, false)
	}
	if err == nil {
		err = checkTopic(topic)
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	p, err := c.listEntries(r.Context(), topic, f, after, c.pageSizeParam(r))
	if err != nil {
		c.redisFail(w, r, "list entries", err)
		return
	}
	crumbs := append(c.topicCrumbs(topic), crumb{"entries", buildLink(c.prefix, "/entries", "t", topic)})
	c.render(w, r, http.StatusOK, "entries.html", crumbs, p)
}

// filterParams reads a search's parameters (body, key, from, to and, for dead letters,
// group and q) and the after parameter.
func filterParams(r *http.Request, deadLetters bool) (deadLetterFilter, string, error) {
	var f deadLetterFilter
	fields := []struct {
		name string
		to   *string
	}{{"body", &f.Body}, {"key", &f.Key}, {"from", &f.From}, {"to", &f.To}, {"from-id", &f.FromID}, {"to-id", &f.ToID}, {"group", &f.Group}, {"q", &f.Q}}
	if !deadLetters {
		fields = fields[:6]
	}
	var err error
	for _, v := range fields {
		if *v.to, err = param(r, v.name, false); err != nil {
			return f, "", err
		}
	}
	if err := f.parseRange(); err != nil {
		return f, "", err
	}
	after, err := afterParam(r)
	return f, after, err
}

// checkTopic validates a topic name the way package stream does.
func checkTopic(topic string) error {
	if _, err := streamwire.StreamKey(topic, false, ""); err != nil {
		return err
	}
	return nil
}

// deadLetterView is the data of one dead letter's page.
type deadLetterView struct {
	Topic   string
	DL      stream.DeadLetter
	Fields  fieldList
	Body    string
	BodyCut int
	BodyErr string
	IsJSON  bool
}

func (c *Console) pageDeadLetter(w http.ResponseWriter, r *http.Request) {
	topic, err := param(r, "t", true)
	var id string
	if err == nil {
		id, err = param(r, "id", true)
	}
	if err == nil && !validID(id) {
		err = fmt.Errorf("parameter \"id\": %q is not a stream entry id", id)
	}
	if err == nil {
		err = checkTopic(topic)
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := c.call(r.Context())
	d, err := c.dl.Get(ctx, topic, id)
	cancel()
	if errors.Is(err, redstream.ErrNotFound) {
		c.fail(w, r, http.StatusNotFound, fmt.Sprintf("no dead letter %s of topic %q (replayed or deleted?)", id, topic))
		return
	}
	if err != nil {
		c.redisFail(w, r, "read dead letter", err)
		return
	}
	v := deadLetterView{Topic: topic, DL: d}
	names := make([]string, 0, len(d.Fields))
	for k := range d.Fields {
		names = append(names, k)
	}
	sort.Strings(names)
	pairs := make([][2]string, len(names))
	for i, k := range names {
		pairs[i] = [2]string{k, d.Fields[k]}
	}
	v.Fields = c.fields(pairs)
	body, err := d.Body()
	if err != nil {
		v.BodyErr = err.Error()
	} else {
		var pretty bytes.Buffer
		if len(body) <= 4*c.maxBody && json.Valid(body) && json.Indent(&pretty, body, "", "  ") == nil {
			body, v.IsJSON = pretty.Bytes(), true
		}
		v.Body, v.BodyCut = cutString(string(body), c.maxBody)
	}
	crumbs := append(c.topicCrumbs(topic),
		crumb{"dead letters", buildLink(c.prefix, "/dlq", "t", topic)},
		crumb{id, buildLink(c.prefix, "/dlq/entry", "t", topic, "id", id)})
	c.render(w, r, http.StatusOK, "entry.html", crumbs, v)
}

func (c *Console) pagePurge(w http.ResponseWriter, r *http.Request) {
	topic, err := param(r, "t", true)
	if err == nil {
		err = checkTopic(topic)
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if c.readOnly {
		c.fail(w, r, http.StatusForbidden, "the console is read-only")
		return
	}
	ctx, cancel := c.call(r.Context())
	n, err := c.dl.Len(ctx, topic)
	cancel()
	if err != nil {
		c.redisFail(w, r, "count dead letters", err)
		return
	}
	crumbs := append(c.topicCrumbs(topic), crumb{"dead letters", buildLink(c.prefix, "/dlq", "t", topic)})
	c.render(w, r, http.StatusOK, "purge.html", crumbs, struct {
		Topic string
		Count int64
	}{topic, n})
}

// result is the data of the page an action answers with.
type result struct {
	Topic   string
	Action  string
	Lines   []string
	Errors  []string
	BackDLQ string
}

// postIDs returns the topic and the ids of an action's form, validated.
func (c *Console) postIDs(r *http.Request) (string, []string, error) {
	topic := r.PostForm.Get("t")
	if err := checkTopic(topic); err != nil {
		return "", nil, err
	}
	ids := r.PostForm["id"]
	if len(ids) == 0 {
		return "", nil, errors.New("no dead letter selected")
	}
	if len(ids) > MaxPageSize {
		return "", nil, fmt.Errorf("%d dead letters selected, at most %d at once", len(ids), MaxPageSize)
	}
	for _, id := range ids {
		if !validID(id) {
			return "", nil, fmt.Errorf("%q is not a stream entry id", id)
		}
	}
	return topic, ids, nil
}

func (c *Console) doReplay(w http.ResponseWriter, r *http.Request) {
	topic, ids, err := c.postIDs(r)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	var opts []stream.ReplayOption
	if r.PostForm.Get("all_groups") != "" {
		opts = append(opts, stream.ToAllGroups())
	}
	res := result{Topic: topic, Action: "replay", BackDLQ: buildLink(c.prefix, "/dlq", "t", topic)}
	replayed := 0
	for i, id := range ids {
		ctx, cancel := c.call(r.Context())
		newID, err := c.dl.Replay(ctx, topic, id, opts...)
		cancel()
		if err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", id, err))
			if !errors.Is(err, redstream.ErrNotFound) {
				// Redis fails or hangs: stop rather than wait out a timeout per entry.
				if rest := len(ids) - i - 1; rest > 0 {
					res.Errors = append(res.Errors, fmt.Sprintf("stopped: %d selected dead letters not replayed", rest))
				}
				break
			}
			continue
		}
		replayed++
		res.Lines = append(res.Lines, fmt.Sprintf("dead letter %s replayed as entry %s", id, newID))
	}
	c.log.Info("console: replayed dead letters", "topic", topic, "replayed", replayed, "failed", len(res.Errors),
		"all_groups", len(opts) > 0)
	c.renderResult(w, r, res)
}

// replayAllLimit and replayAllTime bound one "replay all" request; the page offers to go on.
const (
	replayAllLimit = 1000
	replayAllTime  = 30 * time.Second
)

func (c *Console) doReplayAll(w http.ResponseWriter, r *http.Request) {
	topic := r.PostForm.Get("t")
	if err := checkTopic(topic); err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	var opts []stream.ReplayOption
	if r.PostForm.Get("all_groups") != "" {
		opts = append(opts, stream.ToAllGroups())
	}
	ctx, cancel := context.WithTimeout(r.Context(), replayAllTime)
	n, err := c.dl.ReplayAll(ctx, topic, replayAllLimit, opts...)
	cancel()
	res := result{Topic: topic, Action: "replay all", BackDLQ: buildLink(c.prefix, "/dlq", "t", topic),
		Lines: []string{fmt.Sprintf("%d dead letters replayed", n)}}
	if err != nil {
		res.Errors = append(res.Errors, err.Error())
	}
	lctx, lcancel := c.call(r.Context())
	if left, err := c.dl.Len(lctx, topic); err == nil && left > 0 {
		res.Lines = append(res.Lines, fmt.Sprintf("%d dead letters remain (at most %d are replayed per request, "+
			"and replays that failed again wait for the next request)", left, replayAllLimit))
	}
	lcancel()
	c.log.Info("console: replayed all dead letters", "topic", topic, "replayed", n, "error", err, "all_groups", len(opts) > 0)
	c.renderResult(w, r, res)
}

func (c *Console) doDelete(w http.ResponseWriter, r *http.Request) {
	topic, ids, err := c.postIDs(r)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	res := result{Topic: topic, Action: "delete", BackDLQ: buildLink(c.prefix, "/dlq", "t", topic)}
	ctx, cancel := c.call(r.Context())
	n, err := c.dl.Delete(ctx, topic, ids...)
	cancel()
	if err != nil {
		c.redisFail(w, r, "delete dead letters", err)
		return
	}
	res.Lines = append(res.Lines, fmt.Sprintf("%d of %d selected dead letters deleted", n, len(ids)))
	if int(n) < len(ids) {
		res.Lines = append(res.Lines, "the others were gone already (replayed or deleted)")
	}
	c.log.Info("console: deleted dead letters", "topic", topic, "deleted", n, "selected", len(ids))
	c.renderResult(w, r, res)
}

func (c *Console) doPurge(w http.ResponseWriter, r *http.Request) {
	topic := r.PostForm.Get("t")
	if err := checkTopic(topic); err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if r.PostForm.Get("confirm") != topic {
		c.fail(w, r, http.StatusBadRequest, "purge not confirmed: type the topic's name exactly")
		return
	}
	ctx, cancel := c.call(r.Context())
	n, err := c.dl.Purge(ctx, topic)
	cancel()
	if err != nil {
		c.redisFail(w, r, "purge dead letters", err)
		return
	}
	c.log.Info("console: purged dead letters", "topic", topic, "deleted", n)
	c.renderResult(w, r, result{Topic: topic, Action: "purge", BackDLQ: buildLink(c.prefix, "/dlq", "t", topic),
		Lines: []string{fmt.Sprintf("%d dead letters purged", n)}})
}

// renderResult stores the result of an action and redirects to its page (303 See Other:
// POST-redirect-GET, so a reload does not post the action again). The page is served 409
// when nothing succeeded.
func (c *Console) renderResult(w http.ResponseWriter, r *http.Request, res result) {
	status := http.StatusOK
	if len(res.Lines) == 0 && len(res.Errors) > 0 {
		status = http.StatusConflict
	}
	tok := c.results.put(res, status, time.Now())
	http.Redirect(w, r, buildLink(c.prefix, "/result", "r", tok), http.StatusSeeOther)
}

// fmtDur formats a duration for people: "850ms", "12s", "3m20s", "5h02m", "3d04h".
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "–"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}
