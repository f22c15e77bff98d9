package console

import (
	"regexp"
	"sort"
	"strconv"
)

// A topic's streams: a partitioned topic is one stream per partition ("{orders:p0:3}",
// streamwire.PartitionName), a topic with priority levels one per level besides its own
// ("{orders}:prio:2"). The overview lists each stream and folds those of one topic under a
// row of their own, with their sums.

var (
	partitionRE = regexp.MustCompile(`^\{(.+):p([0-9]+):[0-9]+\}$`)
	levelRE     = regexp.MustCompile(`^(?:\{(.+)\}|(.*\{.*\}.*)):prio:([0-9]+)$`)
)

// streamOf returns the topic whose stream name is one of its partitions or priority levels,
// with the part's label ("p0", "priority 2"), or ok false.
func streamOf(name string) (topic, part string, ok bool) {
	if m := partitionRE.FindStringSubmatch(name); m != nil {
		return m[1], "p" + m[2], true
	}
	if m := levelRE.FindStringSubmatch(name); m != nil {
		if m[1] != "" {
			return m[1], "priority " + m[3], true
		}
		return m[2], "priority " + m[3], true
	}
	return "", "", false
}

// overviewRow is one row of the overview: a stream, or the sum of a topic's streams.
type overviewRow struct {
	topicSummary
	Part   string // a partition's or level's label; "" for a topic's own row
	Folded int    // for a topic's sum row: how many streams it sums; 0 for a stream's row
}

// foldParts orders the summaries as rows: a stream that is no topic's part as it is; a
// topic's partitions and levels (its own stream as level 0) after a row summing them, where
// the topic first appears.
func foldParts(ss []topicSummary) []overviewRow {
	folded := map[string]bool{}
	for _, s := range ss {
		if topic, _, ok := streamOf(s.Name); ok {
			folded[topic] = true
		}
	}
	var order []string
	parts := map[string][]overviewRow{}
	own := map[string]topicSummary{}
	for _, s := range ss {
		topic, part, ok := streamOf(s.Name)
		switch {
		case ok:
		case folded[s.Name]:
			topic, part = s.Name, "priority 0"
		default:
			order = append(order, s.Name)
			own[s.Name] = s
			continue
		}
		if parts[topic] == nil {
			order = append(order, topic)
		}
		parts[topic] = append(parts[topic], overviewRow{topicSummary: s, Part: part})
	}
	rows := make([]overviewRow, 0, len(ss)+len(parts))
	for _, name := range order {
		ps, ok := parts[name]
		if !ok {
			rows = append(rows, overviewRow{topicSummary: own[name]})
			continue
		}
		sort.SliceStable(ps, func(i, j int) bool { return partOrder(ps[i].Part) < partOrder(ps[j].Part) })
		sum := overviewRow{topicSummary: topicSummary{Name: name, Exists: true}}
		for _, p := range ps {
			addTo(&sum, p.topicSummary)
		}
		rows = append(append(rows, sum), ps...)
	}
	return rows
}

// partOrder orders a topic's parts by their number ("p2", "priority 3").
func partOrder(label string) int {
	i := len(label)
	for i > 0 && label[i-1] >= '0' && label[i-1] <= '9' {
		i--
	}
	n, _ := strconv.Atoi(label[i:])
	return n
}

// addTo adds s to a topic's sum row.
func addTo(r *overviewRow, s topicSummary) {
	r.Folded++
	r.Length += s.Length
	r.Consumers += s.Consumers
	r.Idle += s.Idle
	r.Pending += s.Pending
	r.Delayed += s.Delayed
	r.DeadLetters += s.DeadLetters
	r.Groups = max(r.Groups, s.Groups)
	if s.Lag < 0 || r.Lag < 0 {
		r.Lag = -1
	} else {
		r.Lag = max(r.Lag, s.Lag)
	}
	if s.Err != "" && r.Err == "" {
		r.Err = s.Name + ": " + s.Err
	}
}
