package console

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/streamwire"
	"github.com/redstream-go/redstream/stream"
)

// call returns ctx bounded by the console's per-call timeout.
func (c *Console) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// discovery is the outcome of topic discovery.
type discovery struct {
	Topics    []string // topic stream keys, sorted
	Truncated bool     // MaxTopics was reached
}

// scanCount is the COUNT hint of each SCAN.
const scanCount = 1000

// discover returns the topics: the explicit list, or every stream key SCAN finds on every
// master, with dead-letter streams folded into their topics.
func (c *Console) discover(ctx context.Context) (discovery, error) {
	if c.topics != nil {
		t := append([]string(nil), c.topics...)
		sort.Strings(t)
		return discovery{Topics: t}, nil
	}
	// One scan serves every request of the next discoveryTTL (pages, refreshes, other
	// operators): a keyspace of millions of keys is not scanned per request.
	c.discoMu.Lock()
	defer c.discoMu.Unlock()
	if time.Since(c.discoAt) < discoveryTTL {
		return c.disco, nil
	}
	d, err := c.scanTopics(ctx)
	if err != nil {
		return d, err
	}
	c.disco, c.discoAt = d, time.Now()
	return d, nil
}

// discoveryTTL is how long one discovery of the topics serves.
const discoveryTTL = 5 * time.Second

// scanTopics finds the topics by SCAN on every master.
func (c *Console) scanTopics(ctx context.Context) (discovery, error) {
	keys := map[string]bool{}
	truncated := false
	nodes := c.client.Nodes()
	addrs := make([]string, 0, len(nodes))
	for a := range nodes {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for _, addr := range addrs {
		node := nodes[addr]
		if len(nodes) > 1 {
			master, err := c.isMaster(ctx, node)
			if err != nil {
				return discovery{}, fmt.Errorf("role of %s: %w", addr, err)
			}
			if !master {
				continue // its master has the same keys
			}
		}
		full, err := c.scanNode(ctx, node, keys)
		if err != nil {
			return discovery{}, fmt.Errorf("scan %s: %w", addr, err)
		}
		if full {
			truncated = true
			break
		}
	}
	return discovery{Topics: foldTopics(keys), Truncated: truncated}, nil
}

func (c *Console) isMaster(ctx context.Context, node rueidis.Client) (bool, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	role, err := node.Do(ctx, node.B().Role().Build()).ToArray()
	if err != nil {
		return false, err
	}
	if len(role) == 0 {
		return false, errors.New("empty ROLE reply")
	}
	r, err := role[0].ToString()
	return r == "master", err
}

// scanNode adds the stream keys of node to keys, and reports whether MaxTopics was reached.
// It stops after a bounded number of SCAN calls.
func (c *Console) scanNode(ctx context.Context, node rueidis.Client, keys map[string]bool) (bool, error) {
	cursor := uint64(0)
	maxCalls := c.maxTopics/10 + 100 // SCAN may return few keys per call on a sparse keyspace
	for calls := 0; calls < maxCalls; calls++ {
		cctx, cancel := c.call(ctx)
		e, err := node.Do(cctx, node.B().Scan().Cursor(cursor).Count(scanCount).Type("stream").Build()).AsScanEntry()
		cancel()
		if err != nil {
			return false, err
		}
		for _, k := range e.Elements {
			if len(keys) >= c.maxTopics {
				return true, nil
			}
			keys[k] = true
		}
		if e.Cursor == 0 {
			return false, nil
		}
		cursor = e.Cursor
	}
	return true, nil
}

// foldTopics returns the topics among stream keys: every key that is not the dead-letter
// stream of another, and the topic of every dead-letter stream whose topic stream is gone.
func foldTopics(keys map[string]bool) []string {
	topics := map[string]bool{}
	for k := range keys {
		if t, ok := topicOfDeadLetters(k, keys); ok {
			topics[t] = true
			continue
		}
		topics[k] = true
	}
	out := make([]string, 0, len(topics))
	for t := range topics {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// topicOfDeadLetters returns the topic whose dead-letter stream is key, if key is one. Both
// "orders" and "{orders}" have the dead-letter stream "{orders}:dlq"; the one whose stream
// exists is chosen, else the plain name.
func topicOfDeadLetters(key string, keys map[string]bool) (string, bool) {
	base, ok := strings.CutSuffix(key, ":dlq")
	if !ok || base == "" {
		return "", false
	}
	if inner, ok := strings.CutPrefix(base, "{"); ok && strings.HasSuffix(inner, "}") {
		inner = inner[:len(inner)-1]
		if inner != "" && !strings.ContainsAny(inner, "{}") {
			if keys[base] && !keys[inner] {
				return base, true
			}
			if streamwire.DeadLetterStreamName(inner) == key {
				return inner, true
			}
		}
	}
	if streamwire.DeadLetterStreamName(base) == key {
		return base, true
	}
	return "", false
}

// entryView is one stream entry as shown.
type entryView struct {
	ID     string
	Time   time.Time // from the id
	Fields fieldList
}

// fieldList holds the fields of an entry as shown: at most maxFields of them, and at most
// 4*MaxBodyBytes bytes of values in all.
type fieldList struct {
	List    []fieldView
	Omitted int // fields not shown
}

// maxFields bounds the fields shown of one entry.
const maxFields = 200

// fields returns the fields of name, value pairs, within the page's bounds.
func (c *Console) fields(pairs [][2]string) fieldList {
	var out fieldList
	budget := 4 * c.maxBody
	for i, p := range pairs {
		if i == maxFields {
			out.Omitted = len(pairs) - i
			break
		}
		v, cut := cutString(p[1], min(c.maxBody, budget))
		n, ncut := cutString(p[0], 256)
		budget -= len(v)
		out.List = append(out.List, fieldView{Name: n, Value: v, Cut: cut + ncut})
	}
	return out
}

// fieldView is one field of an entry, its value cut to the console's MaxBodyBytes.
type fieldView struct {
	Name, Value string
	Cut         int // bytes cut from Value
}

func (c *Console) entry(e rueidis.XRangeSlice) entryView {
	pairs := make([][2]string, len(e.FieldValues))
	for i, fv := range e.FieldValues {
		pairs[i] = [2]string{fv.Field, fv.Value}
	}
	return entryView{ID: e.ID, Time: idTime(e.ID), Fields: c.fields(pairs)}
}

// cutString returns s cut to at most n bytes (at a UTF-8 boundary) and the bytes cut.
func cutString(s string, n int) (string, int) {
	if len(s) <= n {
		return s, 0
	}
	i := n
	for i > 0 && i > n-4 && !isRuneStart(s[i]) {
		i--
	}
	return s[:i], len(s) - i
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// idTime returns the time of a stream entry id ("ms-seq"), or zero.
func idTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

var idRE = regexp.MustCompile(`^[0-9]{1,20}(-[0-9]{1,20})?$`)

// validID reports whether id is a stream entry id ("ms" or "ms-seq").
func validID(id string) bool { return idRE.MatchString(id) }

// topicSummary is one line of the topics page.
type topicSummary struct {
	Name        string
	Exists      bool // the topic stream exists (a dead-letter stream may outlive it)
	Length      int64
	First, Last string // ids, "" when empty
	LastTime    time.Time
	Groups      int
	Consumers   int64 // over the groups
	Pending     int64 // delivered, not acknowledged, over the groups
	Lag         int64 // the largest group's entries not yet delivered; -1 when Redis does not know it
	Delayed     int64 // scheduled messages (WithDelay, WithDeliverAt) not yet due
	Idle        int64 // consumers idle longer than staleAfter: stopped, crashed or stuck
	DeadLetters int64
	Err         string
	groups      []string
}

// staleAfter is how long a consumer may go without reading before the overview counts it
// idle: a running consumer reads at least every BlockTimeout (2 s by default).
var staleAfter = time.Minute

// summaries reads one line per topic with one pipelined round of commands.
func (c *Console) summaries(ctx context.Context, topics []string) []topicSummary {
	cl := c.client
	const per = 6 // commands per topic
	cmds := make(rueidis.Commands, 0, per*len(topics))
	for _, t := range topics {
		sched, _ := streamwire.DelayedKeys(t)
		cmds = append(cmds,
			cl.B().Xlen().Key(t).Build(),
			cl.B().Xrange().Key(t).Start("-").End("+").Count(1).Build(),
			cl.B().Xrevrange().Key(t).End("+").Start("-").Count(1).Build(),
			cl.B().XinfoGroups().Key(t).Build(),
			cl.B().Xlen().Key(streamwire.DeadLetterStreamName(t)).Build(),
			cl.B().Zcard().Key(sched).Build())
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	res := cl.DoMulti(ctx, cmds...)
	out := make([]topicSummary, len(topics))
	for i, t := range topics {
		r := res[per*i : per*i+per]
		s := topicSummary{Name: t}
		var err error
		if s.Length, err = r[0].AsInt64(); err != nil {
			s.Err = err.Error()
		}
		if e, err := r[1].AsXRange(); err == nil && len(e) > 0 {
			s.First = e[0].ID
		}
		if e, err := r[2].AsXRange(); err == nil && len(e) > 0 {
			s.Last, s.LastTime = e[0].ID, idTime(e[0].ID)
		}
		if gs, err := parseGroups(r[3]); err == nil {
			s.Groups, s.Exists = len(gs), true
			for _, g := range gs {
				s.groups = append(s.groups, g.Name)
				s.Consumers += g.Consumers
				s.Pending += g.Pending
				if g.Lag < 0 || s.Lag < 0 {
					s.Lag = -1
				} else {
					s.Lag = max(s.Lag, g.Lag)
				}
			}
		} else if !isNoSuchKey(err) && s.Err == "" {
			s.Err = err.Error()
		}
		if n, err := r[4].AsInt64(); err == nil {
			s.DeadLetters = n
		} else if s.Err == "" {
			s.Err = err.Error()
		}
		if n, err := r[5].AsInt64(); err == nil {
			s.Delayed = n
		} else if s.Err == "" {
			s.Err = err.Error()
		}
		out[i] = s
	}
	c.idleConsumers(ctx, out)
	return out
}

// idleConsumers counts, in one more pipelined round, each topic's consumers that have not
// tried to read for staleAfter (XINFO CONSUMERS).
func (c *Console) idleConsumers(ctx context.Context, ss []topicSummary) {
	cl := c.client
	var cmds rueidis.Commands
	var of []int
	for i, s := range ss {
		for _, g := range s.groups {
			cmds = append(cmds, cl.B().XinfoConsumers().Key(s.Name).Group(g).Build())
			of = append(of, i)
		}
	}
	if len(cmds) == 0 {
		return
	}
	for j, r := range cl.DoMulti(ctx, cmds...) {
		cs, err := r.ToArray()
		if err != nil {
			continue // the group went away meanwhile: its consumers are not counted
		}
		for _, m := range cs {
			info, err := m.AsMap()
			if err != nil {
				continue
			}
			// idle is since the consumer's last attempted read or claim: a running consumer's
			// blocking reads keep it low on a quiet topic too ("inactive", since the last
			// successful one, would not).
			ms, err := mapInt(info, "idle")
			if err == nil && time.Duration(ms)*time.Millisecond > staleAfter {
				ss[of[j]].Idle++
			}
		}
	}
}

func isNoSuchKey(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && strings.Contains(strings.ToLower(re.Error()), "no such key")
}

// topicData is the topic page's data.
type topicData struct {
	topicSummary
	LastGenerated  string // last-generated-id
	MaxDeleted     string // max-deleted-entry-id (Redis 7.0+), "" when unknown
	EntriesAdded   int64  // -1 when unknown
	FirstEntry     *entryView
	LastEntry      *entryView
	GroupList      []groupInfo
	GroupsFailed   string
	StreamInfoFail string
}

// groupInfo is one consumer group (XINFO GROUPS).
type groupInfo struct {
	Name          string
	Consumers     int64
	Pending       int64
	LastDelivered string
	EntriesRead   int64 // -1 when unknown
	Lag           int64 // -1 when unknown (Redis < 7.0, or Redis cannot compute it)
	LagAtLeast    bool  // Lag is a lower bound: counted, and more than maxLagCount
}

// maxLagCount bounds the entries counted for a group whose lag the server does not know
// exactly (see countLags).
const maxLagCount = 10000

// countLags replaces, for each group whose entries-read the server does not report, the lag
// it reports by the number of entries after the group's last-delivered id (at most
// maxLagCount, then LagAtLeast), read with XRANGE in one round trip. Redis then reports an
// estimate, and emulators such as miniredis the stream's length; the count is exact. A
// failed count leaves the reported lag.
func (c *Console) countLags(ctx context.Context, topic string, groups []groupInfo) {
	var idx []int
	cmds := make(rueidis.Commands, 0, len(groups))
	for i, g := range groups {
		if g.EntriesRead >= 0 || g.LastDelivered == "" {
			continue
		}
		start := "(" + g.LastDelivered
		if g.LastDelivered == "0-0" {
			start = "-"
		}
		idx = append(idx, i)
		cmds = append(cmds, c.client.B().Xrange().Key(topic).Start(start).End("+").Count(maxLagCount+1).Build())
	}
	if len(cmds) == 0 {
		return
	}
	for j, r := range c.client.DoMulti(ctx, cmds...) {
		es, err := r.ToArray()
		if err != nil {
			continue
		}
		g := &groups[idx[j]]
		g.Lag, g.LagAtLeast = int64(min(len(es), maxLagCount)), len(es) > maxLagCount
	}
}

func (c *Console) topicInfo(ctx context.Context, topic string) (topicData, error) {
	cl := c.client
	ctx, cancel := c.call(ctx)
	defer cancel()
	res := cl.DoMulti(ctx,
		cl.B().XinfoStream().Key(topic).Build(),
		cl.B().Xrange().Key(topic).Start("-").End("+").Count(1).Build(),
		cl.B().Xrevrange().Key(topic).End("+").Start("-").Count(1).Build(),
		cl.B().XinfoGroups().Key(topic).Build(),
		cl.B().Xlen().Key(streamwire.DeadLetterStreamName(topic)).Build())
	ti := topicData{topicSummary: topicSummary{Name: topic}, EntriesAdded: -1}
	var err error
	if ti.DeadLetters, err = res[4].AsInt64(); err != nil {
		return ti, err
	}
	info, err := res[0].AsMap()
	if err != nil {
		if isNoSuchKey(err) {
			return ti, nil // only the dead letters remain
		}
		return ti, err
	}
	ti.Exists = true
	ti.Length, _ = mapInt(info, "length")
	ti.LastGenerated, _ = mapStr(info, "last-generated-id")
	ti.MaxDeleted, _ = mapStr(info, "max-deleted-entry-id")
	if n, err := mapInt(info, "entries-added"); err == nil {
		ti.EntriesAdded = n
	}
	if e, err := res[1].AsXRangeSlices(); err == nil && len(e) > 0 {
		en := c.entry(e[0])
		ti.First, ti.FirstEntry = en.ID, &en
	}
	if e, err := res[2].AsXRangeSlices(); err == nil && len(e) > 0 {
		en := c.entry(e[0])
		ti.Last, ti.LastTime, ti.LastEntry = en.ID, en.Time, &en
	}
	groups, err := parseGroups(res[3])
	if err != nil {
		ti.GroupsFailed = err.Error()
	}
	c.countLags(ctx, topic, groups)
	ti.GroupList, ti.Groups = groups, len(groups)
	return ti, nil
}

func parseGroups(m rueidis.RedisResult) ([]groupInfo, error) {
	arr, err := m.ToArray()
	if err != nil {
		return nil, err
	}
	out := make([]groupInfo, 0, len(arr))
	for _, g := range arr {
		info, err := g.AsMap()
		if err != nil {
			return out, err
		}
		gi := groupInfo{EntriesRead: -1, Lag: -1}
		gi.Name, _ = mapStr(info, "name")
		gi.Consumers, _ = mapInt(info, "consumers")
		gi.Pending, _ = mapInt(info, "pending")
		gi.LastDelivered, _ = mapStr(info, "last-delivered-id")
		if n, err := mapInt(info, "entries-read"); err == nil {
			gi.EntriesRead = n
		}
		if n, err := mapInt(info, "lag"); err == nil {
			gi.Lag = n
		}
		out = append(out, gi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// consumerInfo is one consumer of a group (XINFO CONSUMERS).
type consumerInfo struct {
	Name    string
	Pending int64
	Idle    time.Duration // since its last attempted interaction
	// Inactive is the time since its last successful interaction (Redis 7.2+), -1 when
	// unknown.
	Inactive time.Duration
	// Removable is true when housekeeping removes it at its next pass: it owns no pending
	// entry and has been idle for ConsumerTimeout. RemovableIn is the idle time it still
	// needs when it owns nothing but is not idle long enough yet (-1 otherwise).
	Removable   bool
	RemovableIn time.Duration
}

// pendingEntry is one entry of a group's pending list (XPENDING).
type pendingEntry struct {
	ID         string
	Time       time.Time
	Consumer   string
	Idle       time.Duration
	Deliveries int64
}

// groupData is the group page's data.
type groupData struct {
	Topic     string
	Group     groupInfo
	Consumers []consumerInfo
	Pending   []pendingEntry
	Next      string // id after which the next page of the pending list starts; "" at the end
	After     string
	// ConsumerTimeout is the housekeeping bound used for Removable (negative: disabled).
	ConsumerTimeout time.Duration
	// Local is the state of Options.Consumers' handlers of this group.
	Local []stream.HandlerStats
}

// localStats returns the Stats of Options.Consumers' handlers of topic (a stream key) and
// group.
func (c *Console) localStats(topic, group string) []stream.HandlerStats {
	var out []stream.HandlerStats
	for _, cons := range c.consumers {
		for _, h := range cons.Stats().Handlers {
			key, err := streamwire.StreamKey(h.Topic, c.cfg.EnvIsolation, c.cfg.Env)
			if err == nil && key == topic && h.Group == group {
				out = append(out, h)
			}
		}
	}
	return out
}

var errNoGroup = errors.New("no such consumer group")

// maxConsumers bounds the consumers a group page lists.
const maxConsumers = 1000

func (c *Console) groupPage(ctx context.Context, topic, group, after string, n int) (groupData, error) {
	cl := c.client
	ctx, cancel := c.call(ctx)
	defer cancel()
	start := "-"
	if after != "" {
		start = "(" + after
	}
	res := cl.DoMulti(ctx,
		cl.B().XinfoGroups().Key(topic).Build(),
		cl.B().XinfoConsumers().Key(topic).Group(group).Build(),
		cl.B().Xpending().Key(topic).Group(group).Start(start).End("+").Count(int64(n)+1).Build())
	gp := groupData{Topic: topic, After: after, ConsumerTimeout: c.cfg.ConsumerTimeout, Local: c.localStats(topic, group)}
	groups, err := parseGroups(res[0])
	if err != nil {
		return gp, err
	}
	c.countLags(ctx, topic, groups)
	found := false
	for _, g := range groups {
		if g.Name == group {
			gp.Group, found = g, true
		}
	}
	if !found {
		return gp, errNoGroup
	}
	if gp.Consumers, err = c.parseConsumers(res[1]); err != nil {
		return gp, err
	}
	sort.Slice(gp.Consumers, func(i, j int) bool { return gp.Consumers[i].Name < gp.Consumers[j].Name })
	pend, err := res[2].ToArray()
	if err != nil {
		return gp, err
	}
	for _, p := range pend {
		f, err := p.ToArray()
		if err != nil || len(f) < 4 {
			return gp, fmt.Errorf("unexpected XPENDING reply")
		}
		var pe pendingEntry
		pe.ID, _ = f[0].ToString()
		pe.Consumer, _ = f[1].ToString()
		idle, _ := f[2].AsInt64()
		pe.Idle = time.Duration(idle) * time.Millisecond
		pe.Deliveries, _ = f[3].AsInt64()
		pe.Time = idTime(pe.ID)
		gp.Pending = append(gp.Pending, pe)
	}
	if len(gp.Pending) > n {
		gp.Pending = gp.Pending[:n]
		gp.Next = gp.Pending[n-1].ID
	}
	return gp, nil
}

// parseConsumers reads an XINFO CONSUMERS reply (at most maxConsumers of them), with each
// consumer's removability under Config.ConsumerTimeout.
func (c *Console) parseConsumers(m rueidis.RedisResult) ([]consumerInfo, error) {
	cons, err := m.ToArray()
	if err != nil {
		return nil, err
	}
	var out []consumerInfo
	for i, e := range cons {
		if i == maxConsumers {
			break
		}
		info, err := e.AsMap()
		if err != nil {
			return nil, err
		}
		ci := consumerInfo{Inactive: -1, RemovableIn: -1}
		ci.Name, _ = mapStr(info, "name")
		ci.Pending, _ = mapInt(info, "pending")
		idle, _ := mapInt(info, "idle")
		ci.Idle = time.Duration(idle) * time.Millisecond
		if n, err := mapInt(info, "inactive"); err == nil && n >= 0 {
			ci.Inactive = time.Duration(n) * time.Millisecond
		}
		if to := c.cfg.ConsumerTimeout; to > 0 && ci.Pending == 0 {
			if ci.Idle >= to {
				ci.Removable = true
			} else {
				ci.RemovableIn = to - ci.Idle
			}
		}
		out = append(out, ci)
	}
	return out, nil
}

// deadLetterRow is one dead letter in a list.
type deadLetterRow struct {
	stream.DeadLetter
	ErrorShort string
	Key        string
}

// deadLetterData is the dead-letter list's data.
type deadLetterData struct {
	Topic     string
	Total     int64
	Rows      []deadLetterRow
	Filter    deadLetterFilter
	After     string
	Next      string // id to continue after; "" at the end
	Scanned   int    // dead letters read to fill the page
	Budget    time.Duration
	OutOfTime bool     // the page stopped at its time budget, not at its end or full
	Groups    []string // groups seen on this page, for the filter
}

// deadLetterFilter selects dead letters: every set field must match.
type deadLetterFilter struct {
	Group    string // exact
	Q        string // in the error text, any case
	Body     string // in the body as stored, exact case
	Key      string // the message key, exact
	From, To string // time range of the entries, as the form gives it ("2006-01-02T15:04"), UTC
	FromID   string // first entry id, inclusive
	ToID     string // last entry id, inclusive
	from, to string // the range's bounds as stream ids ("" for none): the narrower of both
}

// Set reports whether any filter is set.
func (f deadLetterFilter) Set() bool {
	return f.Group != "" || f.Q != "" || f.Body != "" || f.Key != "" || f.From != "" || f.To != "" || f.FromID != "" || f.ToID != ""
}

// Pairs returns the filter as link parameters, with the topic first.
func (f deadLetterFilter) Pairs(topic string) []string {
	return []string{"t", topic, "group", f.Group, "q", f.Q, "body", f.Body, "key", f.Key, "from", f.From, "to", f.To,
		"from-id", f.FromID, "to-id", f.ToID}
}

// formTime is the time format of the filter's range (an HTML datetime-local input, UTC).
const formTime = "2006-01-02T15:04"

// parseRange sets the stream ids of the filter's time range: from the first id of From's
// minute to the last of To's.
func (f *deadLetterFilter) parseRange() error {
	if f.From != "" {
		t, err := time.Parse(formTime, f.From)
		if err != nil {
			return fmt.Errorf("parameter \"from\": %q is not a time like 2006-01-02T15:04", f.From)
		}
		f.from = strconv.FormatInt(max(t.UnixMilli(), 0), 10) + "-0"
	}
	if f.To != "" {
		t, err := time.Parse(formTime, f.To)
		if err != nil {
			return fmt.Errorf("parameter \"to\": %q is not a time like 2006-01-02T15:04", f.To)
		}
		f.to = strconv.FormatInt(max(t.Add(time.Minute).UnixMilli()-1, 0), 10)
	}
	for _, b := range []struct {
		name, id string
		bound    *string
		later    int // the bound kept is the later (1) or the earlier (-1) one
	}{{"from-id", f.FromID, &f.from, 1}, {"to-id", f.ToID, &f.to, -1}} {
		if b.id == "" {
			continue
		}
		if !validID(b.id) {
			return fmt.Errorf("parameter %q: %q is not a stream entry id", b.name, b.id)
		}
		if *b.bound == "" || streamwire.CompareIDs(b.id, *b.bound)*b.later > 0 {
			*b.bound = b.id
		}
	}
	return nil
}

// match reports whether d passes the filter (the time range is the read's).
func (f deadLetterFilter) match(d stream.DeadLetter, ql string) bool {
	switch {
	case f.Group != "" && d.Group != f.Group:
		return false
	case f.Key != "" && d.Fields[streamwire.FieldKey] != f.Key:
		return false
	case f.Q != "" && !strings.Contains(strings.ToLower(d.Error), ql):
		return false
	case f.Body != "" && !strings.Contains(d.Fields[streamwire.FieldBody], f.Body):
		return false
	}
	return true
}

// searchBudget bounds the time a filtered page reads dead letters for; searchChunk is how
// many one read takes. A page that runs out of time ends with a link to go on where it
// stopped, so that a search over a million dead letters answers every page in about this
// time.
var searchBudget = 1500 * time.Millisecond

const searchChunk = 1000

// listDeadLetters returns up to n dead letters of topic after id after (exclusive) that match
// the filter (see scanRange).
func (c *Console) listDeadLetters(ctx context.Context, topic string, f deadLetterFilter, after string, n int) (deadLetterData, error) {
	p := deadLetterData{Topic: topic, Filter: f, After: after, Budget: searchBudget}
	var err error
	lctx, cancel := c.call(ctx)
	p.Total, err = c.dl.Len(lctx, topic)
	cancel()
	if err != nil {
		return p, err
	}
	ql := strings.ToLower(f.Q)
	groups := map[string]bool{}
	var letters []stream.DeadLetter
	read := func(ctx context.Context, start, end string, count int64) ([]string, error) {
		var err error
		if letters, err = c.dl.List(ctx, topic, stream.ListOptions{Start: start, End: end, Count: count}); err != nil {
			return nil, err
		}
		ids := make([]string, len(letters))
		for i, d := range letters {
			ids[i] = d.ID
		}
		return ids, nil
	}
	keep := func(i int) bool {
		d := letters[i]
		groups[d.Group] = true
		if !f.match(d, ql) {
			return false
		}
		short, _ := cutString(d.Error, 200)
		key, _ := cutString(d.Fields[streamwire.FieldKey], 200)
		p.Rows = append(p.Rows, deadLetterRow{DeadLetter: d, ErrorShort: short, Key: key})
		return true
	}
	p.Scanned, p.Next, p.OutOfTime, err = c.scanRange(ctx, f.Set(), f.from, f.to, after, n, read, keep)
	if err != nil {
		return p, err
	}
	for g := range groups {
		p.Groups = append(p.Groups, g)
	}
	sort.Strings(p.Groups)
	return p, nil
}

// scanRange reads entries in id order after id after (exclusive) within [lo, hi] ("" for no
// bound) with read, and passes each to keep, which reports whether it took it, until n are
// taken, the range ends or, when filtered, searchBudget is spent. Unfiltered, it reads n+1;
// filtered, searchChunk at a time. It returns how many it read and, when more may follow,
// the id to go on after (with outOfTime when the budget stopped it).
func (c *Console) scanRange(ctx context.Context, filtered bool, lo, hi, after string, n int,
	read func(ctx context.Context, start, end string, count int64) ([]string, error), keep func(i int) bool) (scanned int, next string, outOfTime bool, err error) {
	from, taken := after, 0
	deadline := time.Now().Add(searchBudget)
	for {
		start := lo
		if from != "" && (start == "" || streamwire.CompareIDs(from, start) >= 0) {
			start = "(" + from
		}
		if start == "" {
			start = "-"
		}
		batch := int64(n + 1)
		if filtered {
			batch = searchChunk
		}
		rctx, cancel := c.call(ctx)
		ids, err := read(rctx, start, hi, batch)
		cancel()
		if err != nil {
			return scanned, "", false, err
		}
		for i, id := range ids {
			if taken == n {
				return scanned, from, false, nil // more may follow: go on after the last one read
			}
			scanned++
			from = id
			if keep(i) {
				taken++
			}
		}
		if int64(len(ids)) < batch {
			return scanned, "", false, nil // the end of the range
		}
		if time.Now().After(deadline) {
			return scanned, from, true, nil // the budget is spent: go on after the last one read
		}
	}
}

var errNoField = errors.New("no such field")

// mapInt returns field k of a XINFO reply as an integer (an error when absent or nil).
func mapInt(m map[string]rueidis.RedisMessage, k string) (int64, error) {
	v, ok := m[k]
	if !ok {
		return 0, errNoField
	}
	return v.AsInt64()
}

// mapStr returns field k of a XINFO reply as a string (an error when absent or nil).
func mapStr(m map[string]rueidis.RedisMessage, k string) (string, error) {
	v, ok := m[k]
	if !ok {
		return "", errNoField
	}
	return v.ToString()
}

// entriesData is the data of a topic's entries page.
type entriesData struct {
	Topic     string
	Rows      []entryRow
	Filter    deadLetterFilter // Key, Body, From and To (a topic's entries have no group or error)
	After     string
	Next      string
	Scanned   int
	Budget    time.Duration
	OutOfTime bool
}

// entryRow is one entry of a topic, as listed.
type entryRow struct {
	ID      string
	Time    time.Time
	Key     string
	Body    string // as stored (gzip bodies are base64), cut at 200 bytes
	BodyCut int
	Fields  int
}

// listEntries returns up to n entries of topic after id after (exclusive) that match the
// filter's key, body and time range (see scanRange).
func (c *Console) listEntries(ctx context.Context, topic string, f deadLetterFilter, after string, n int) (entriesData, error) {
	p := entriesData{Topic: topic, Filter: f, After: after, Budget: searchBudget}
	var es []rueidis.XRangeSlice
	read := func(ctx context.Context, start, end string, count int64) ([]string, error) {
		if end == "" {
			end = "+"
		}
		var err error
		if es, err = c.client.Do(ctx, c.client.B().Xrange().Key(topic).Start(start).End(end).Count(count).Build()).AsXRangeSlices(); err != nil {
			return nil, err
		}
		ids := make([]string, len(es))
		for i, e := range es {
			ids[i] = e.ID
		}
		return ids, nil
	}
	keep := func(i int) bool {
		e := es[i]
		row := entryRow{ID: e.ID, Time: idTime(e.ID), Fields: len(e.FieldValues)}
		var key, body string
		for _, fv := range e.FieldValues {
			switch fv.Field {
			case streamwire.FieldKey:
				key = fv.Value
			case streamwire.FieldBody:
				body = fv.Value
			}
		}
		if (f.Key != "" && key != f.Key) || (f.Body != "" && !strings.Contains(body, f.Body)) {
			return false
		}
		row.Key, _ = cutString(key, 200)
		row.Body, row.BodyCut = cutString(body, 200)
		p.Rows = append(p.Rows, row)
		return true
	}
	var err error
	p.Scanned, p.Next, p.OutOfTime, err = c.scanRange(ctx, f.Set(), f.from, f.to, after, n, read, keep)
	return p, err
}
