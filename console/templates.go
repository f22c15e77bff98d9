package console

import (
	"embed"
	"html/template"
	"net/url"
	"strconv"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed templates/console.css
var consoleCSS string

//go:embed templates/console.js
var consoleJS string

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"link":         buildLink,
	"add":          func(a, b int) int { return a + b },
	"hoursChoices": func() []int { return []int{1, 3, 6, 12, 24} },
	"refreshParam": func(n int) string {
		if n == 0 {
			return ""
		}
		return strconv.Itoa(n)
	},
	"linkf": func(prefix, path string, pairs []string, kv ...string) string {
		return buildLink(prefix, path, append(append([]string(nil), pairs...), kv...)...)
	},
	"dur": fmtDur,
	"ms":  func(ms int64) string { return fmtDur(time.Duration(ms) * time.Millisecond) },
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return fmtDur(time.Since(t)) + " ago"
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000Z")
	},
}).ParseFS(templateFS, "templates/*.html"))

// buildLink returns prefix + path with the query kv (name, value, ...), skipping empty
// values.
func buildLink(prefix, path string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Add(kv[i], kv[i+1])
		}
	}
	s := prefix + path
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s
}
