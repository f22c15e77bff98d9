package console

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// A topic's history: what its consumers recorded per minute and group (stream's
// history.go, streamwire.HistoryKey), read back for the last hours in one pipelined round
// and drawn as an inline SVG chart (markup, no script and no style: the CSP stays strict).

// historySeries is one kind's counts, minute by minute.
type historySeries struct {
	Kind   string
	Color  string
	Total  int64
	Points string // the SVG polyline's points
}

// historyGroup is one group's totals over the range, in the order of HistoryKinds.
type historyGroup struct {
	Name   string
	Totals []int64
}

// historyPage is the data of a topic's history page.
type historyPage struct {
	Topic         string
	Group         string // "" for every group
	Hours         int
	From, To      time.Time
	Series        []historySeries
	Groups        []historyGroup
	Kinds         []string
	Max           int64 // the chart's top: the largest count of one minute
	Width, Height int
	Empty         bool
}

// historyColors are the kinds' line colors (processed, failed, retried, dead).
var historyColors = [...]string{"#2b7a3d", "#c0392b", "#d68910", "#6c3483"}

const (
	historyWidth  = 960
	historyHeight = 200
	maxHours      = 24
)

// history reads the last hours of topic's history (of group, or of all groups).
func (c *Console) history(ctx context.Context, topic, group string, hours int) (historyPage, error) {
	now := time.Now()
	last := now.Unix() / 60
	first := last - int64(hours)*60 + 1
	p := historyPage{Topic: topic, Group: group, Hours: hours, From: time.Unix(first*60, 0), To: now,
		Kinds: streamwire.HistoryKinds[:], Width: historyWidth, Height: historyHeight}
	cl := c.client
	cmds := make(rueidis.Commands, 0, last-first+1)
	for m := first; m <= last; m++ {
		cmds = append(cmds, cl.B().Hgetall().Key(streamwire.HistoryKey(topic, m)).Build())
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	kinds := map[string]int{}
	for i, k := range streamwire.HistoryKinds {
		kinds[k] = i
	}
	counts := make([][]int64, len(streamwire.HistoryKinds)) // [kind][minute]
	for i := range counts {
		counts[i] = make([]int64, len(cmds))
	}
	groups := map[string][]int64{}
	for i, r := range cl.DoMulti(ctx, cmds...) {
		h, err := r.AsStrMap()
		if err != nil {
			return p, err
		}
		for f, v := range h {
			kind, g, ok := strings.Cut(f, "|")
			k, known := kinds[kind]
			n, err := strconv.ParseInt(v, 10, 64)
			if !ok || !known || err != nil || n < 0 {
				continue // not a field the consumers write
			}
			if groups[g] == nil {
				groups[g] = make([]int64, len(kinds))
			}
			groups[g][k] += n
			if group == "" || g == group {
				counts[k][i] += n
			}
		}
	}
	for _, cs := range counts {
		for _, n := range cs {
			p.Max = max(p.Max, n)
		}
	}
	p.Empty = p.Max == 0
	for k, cs := range counts {
		s := historySeries{Kind: streamwire.HistoryKinds[k], Color: historyColors[k]}
		var b strings.Builder
		for i, n := range cs {
			s.Total += n
			x := float64(i) * float64(historyWidth) / float64(max(len(cs)-1, 1))
			y := float64(historyHeight)
			if p.Max > 0 {
				y -= float64(n) * float64(historyHeight) / float64(p.Max)
			}
			fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
		}
		s.Points = strings.TrimSpace(b.String())
		p.Series = append(p.Series, s)
	}
	for name, totals := range groups {
		p.Groups = append(p.Groups, historyGroup{Name: name, Totals: totals})
	}
	sort.Slice(p.Groups, func(i, j int) bool { return p.Groups[i].Name < p.Groups[j].Name })
	return p, nil
}

func (c *Console) pageHistory(w http.ResponseWriter, r *http.Request) {
	topic, err := param(r, "t", true)
	var group string
	if err == nil {
		group, err = param(r, "g", false)
	}
	if err == nil {
		err = checkTopic(topic)
	}
	hours := 3
	if v := r.URL.Query().Get("hours"); v != "" && err == nil {
		if hours, err = strconv.Atoi(v); err != nil || hours < 1 || hours > maxHours {
			err = fmt.Errorf("parameter \"hours\": %q is not a number of hours from 1 to %d", cutDisplay(v, 64), maxHours)
		}
	}
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	p, err := c.history(r.Context(), topic, group, hours)
	if err != nil {
		c.redisFail(w, r, "read the history", err)
		return
	}
	crumbs := append(c.topicCrumbs(topic), crumb{"history", buildLink(c.prefix, "/history", "t", topic)})
	c.render(w, r, http.StatusOK, "history.html", crumbs, p)
}
