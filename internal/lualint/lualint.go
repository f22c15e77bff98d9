// Package lualint checks redstream's Redis scripts for the rules every .lua file of the
// repository follows (package lua's doc lists them). Lua numbers are doubles and Redis
// formats them lossily, and miniredis runs the scripts on gopher-lua, whose semantics differ
// from Redis's Lua 5.1 in corners; the rules keep the scripts inside what both run exactly:
//
//   - tostring: numbers are formatted with string.format('%d', x), never tostring
//     (1767225600000000 would print as 1.7672256e+15);
//   - floor-ceil: no math.floor or math.ceil, whose float quotient can be off by one; quotients
//     are (a - math.fmod(a, b)) / b;
//   - modulo: no '%' operator (Lua 5.1 computes it as a - floor(a/b)*b); math.fmod is exact;
//   - number-arg: no number handed to redis.call or redis.pcall, which Redis formats itself
//     (possibly in exponent notation): a tonumber(...), math.* or arithmetic argument, or a
//     local assigned one, must be string.format('%d', x). Small literals (0, 1, -1) are fine;
//   - global: no assignment to an undeclared name (a global; Redis refuses them);
//   - self-read: no multiple assignment that reads a name it assigns (a, b = b, a):
//     gopher-lua assigns left to right;
//   - contract: a script (not a fragment) starts with a comment naming it ("-- name.lua: " or
//     "-- name: ", after a generated-code line if any) and documents its KEYS and Reply.
//
// The checks read the source text (comments and string contents removed), not a parse tree:
// they are conservative rules of thumb that the repository's scripts obey, run by the
// package's tests over every .lua file.
package lualint

import (
	"fmt"
	"regexp"
	"strings"
)

// Finding is one broken rule.
type Finding struct {
	Line int    // 1-based line number
	Rule string // the rule's name, as in the package doc
	Text string // the offending line, trimmed
	Why  string // what is wrong and what to write instead
}

func (f Finding) String() string {
	return fmt.Sprintf("%d: %s: %q: %s", f.Line, f.Rule, f.Text, f.Why)
}

// Options selects the rules that depend on what the file is.
type Options struct {
	// Contract requires the header comment of a script. Fragments assembled into scripts
	// by internal/luagen have none.
	Contract bool
}

var (
	reTostring  = regexp.MustCompile(`\btostring\s*\(`)
	reFloorCeil = regexp.MustCompile(`\bmath\.(floor|ceil)\b`)
	reCall      = regexp.MustCompile(`\bredis\.p?call\s*\(`)
	reLocal     = regexp.MustCompile(`\blocal\s+(function\s+)?([A-Za-z_][A-Za-z_0-9 ,]*)`)
	reFunc      = regexp.MustCompile(`\bfunction\s*([A-Za-z_][A-Za-z_0-9.:]*)?\s*\(([^)]*)\)`)
	reFor       = regexp.MustCompile(`\bfor\s+([A-Za-z_][A-Za-z_0-9 ,]*?)\s*(=|\bin\b)`)
	reStmtStart = regexp.MustCompile(`^\s*(local\s+)?([A-Za-z_][A-Za-z_0-9]*(\s*,\s*[A-Za-z_][A-Za-z_0-9]*)*)\s*=([^=].*)$`)
	reElemSet   = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z_0-9]*)\[.*\]\s*=([^=].*)$`)
	reLiteral   = regexp.MustCompile(`^-?[0-9]+$`)
	reName      = regexp.MustCompile(`^[A-Za-z_][A-Za-z_0-9]*$`)
)

// Check returns the rules src breaks; name is the file's base name (e.g. "gcra.lua").
func Check(name string, src []byte, opt Options) []Finding {
	k := &checker{declared: map[string]bool{}, numeric: map[string]bool{}}
	raw := strings.Split(string(src), "\n")
	code := strings.Split(Code(string(src)), "\n")
	if opt.Contract {
		checkContract(name, string(src), func(line int, rule, text, why string) { k.add(line, rule, text, why) })
	}
	for i, line := range code {
		if strings.TrimSpace(line) == "" {
			continue
		}
		k.line, k.text = i+1, ""
		if i < len(raw) {
			k.text = raw[i]
		}
		k.lexical(line)
		// Declarations first, so that "local x = x + 1" and "local function f(a)" count.
		global := k.declarations(line)
		k.assignments(line, global)
		k.callArguments(line)
	}
	return k.out
}

// checker holds the state of one Check: what the lines so far declared and which names
// hold numbers, and the findings.
type checker struct {
	declared, numeric map[string]bool
	line              int    // the current line's number
	text              string // the current line as written
	out               []Finding
}

func (k *checker) add(line int, rule, text, why string) {
	k.out = append(k.out, Finding{Line: line, Rule: rule, Text: strings.TrimSpace(text), Why: why})
}

// report adds a finding on the current line.
func (k *checker) report(rule, why string) { k.add(k.line, rule, k.text, why) }

// lexical applies the rules a line breaks by its text alone.
func (k *checker) lexical(line string) {
	if reTostring.MatchString(line) {
		k.report("tostring", "tostring prints large numbers as 1.7e+15; use string.format('%d', x)")
	}
	if reFloorCeil.MatchString(line) {
		k.report("floor-ceil", "floor/ceil of a float quotient can be off by one; use math.fmod")
	}
	if strings.Contains(line, "%") {
		k.report("modulo", "'%' is a - floor(a/b)*b in Lua 5.1; use math.fmod, which is exact")
	}
}

// declarations records the names a line declares (function parameters, locals, loop
// variables) and reports whether it declares a global function.
func (k *checker) declarations(line string) (global bool) {
	for _, f := range reFunc.FindAllStringSubmatch(line, -1) {
		for _, p := range strings.Split(f[2], ",") {
			k.declared[strings.TrimSpace(p)] = true
		}
		if f[1] != "" && !strings.Contains(f[1], ".") && !strings.Contains(f[1], ":") &&
			!regexp.MustCompile(`\blocal\s+function\s+`+regexp.QuoteMeta(f[1])+`\b`).MatchString(line) && !k.declared[f[1]] {
			global = true
			k.report("global", "function "+f[1]+" is a global; declare it local")
		}
	}
	for _, m := range reLocal.FindAllStringSubmatch(line, -1) {
		for _, v := range strings.Split(m[2], ",") {
			k.declared[strings.TrimSpace(v)] = true
		}
	}
	for _, m := range reFor.FindAllStringSubmatch(line, -1) {
		for _, v := range strings.Split(m[1], ",") {
			k.declared[strings.TrimSpace(v)] = true
		}
	}
	return global
}

// assignments checks an assignment statement (globals, multiple assignment reading its
// own targets) and records the names and tables it makes numeric.
func (k *checker) assignments(line string, global bool) {
	if m := reStmtStart.FindStringSubmatch(line); m != nil {
		names := splitTrim(m[2])
		values := splitTop(m[4])
		if m[1] == "" {
			for _, v := range names {
				if !k.declared[v] && !global {
					k.report("global", "assigns the global "+v+"; declare it local")
				}
			}
			if len(names) > 1 {
				for _, v := range names {
					if regexp.MustCompile(`\b` + v + `\b`).MatchString(m[4]) {
						k.report("self-read", "reads "+v+", which it also assigns: gopher-lua (miniredis) assigns left to right; use a temporary")
						break
					}
				}
			}
		}
		for j, v := range names {
			if j < len(values) && isNumeric(values[j], k.numeric) {
				k.numeric[v] = true
			}
		}
	}
	if m := reElemSet.FindStringSubmatch(line); m != nil && isNumeric(m[2], k.numeric) {
		k.numeric[m[1]+"[]"] = true // a table that holds numbers
	}
}

// callArguments reports numbers passed to redis.call / redis.pcall.
func (k *checker) callArguments(line string) {
	for _, loc := range reCall.FindAllStringIndex(line, -1) {
		args, ok := callArgs(line[loc[1]:])
		if !ok {
			continue
		}
		for _, a := range args {
			if a == "" || reLiteral.MatchString(a) {
				continue
			}
			if isNumeric(a, k.numeric) {
				k.report("number-arg", fmt.Sprintf("%s is a number, which Redis formats itself (possibly as 1e+15); pass string.format('%%d', %s)", a, a))
			}
		}
	}
}

// isNumeric reports whether the expression e (comments and string contents removed) is
// evidently a number: a tonumber(...) or math.*(...) call, a length, arithmetic at its top
// level, a numeric literal, a name known to hold one of these, or an element of a table
// whose elements were assigned one of these.
func isNumeric(e string, numeric map[string]bool) bool {
	e = strings.TrimSpace(e)
	if e == "" {
		return false
	}
	if reLiteral.MatchString(e) || (reName.MatchString(e) && numeric[e]) {
		return true
	}
	top := flatten(e)
	if numeric[top] { // an element of a table of numbers: t[...]
		return true
	}
	if strings.HasPrefix(top, "tonumber(") || strings.HasPrefix(top, "math.") || strings.HasPrefix(top, "#") {
		return true
	}
	// Arithmetic at the top level: a binary + - * / ^ after an operand.
	for i := 1; i < len(top); i++ {
		switch top[i] {
		case '+', '*', '/', '^':
			return true
		case '-':
			prev := strings.TrimRight(top[:i], " \t")
			if prev != "" && strings.ContainsAny(prev[len(prev)-1:], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_)]") {
				return true
			}
		}
	}
	return false
}

// flatten removes what is nested inside (), [] and {} of e, keeping the brackets.
func flatten(e string) string {
	var b strings.Builder
	depth := 0
	for _, r := range e {
		switch r {
		case '(', '[', '{':
			if depth == 0 {
				b.WriteRune(r)
			}
			depth++
			continue
		case ')', ']', '}':
			depth--
			if depth == 0 {
				b.WriteRune(r)
			}
			continue
		}
		if depth == 0 {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// callArgs splits the argument list that starts right after a call's '(' into its
// top-level arguments; ok is false when the list does not close on this line.
func callArgs(s string) (args []string, ok bool) {
	depth := 0
	for i, r := range s {
		switch r {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth == 0 {
				return splitTop(s[:i]), true
			}
			depth--
		}
	}
	return nil, false
}

// splitTop splits s at its top-level commas.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

func splitTrim(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		out = append(out, strings.TrimSpace(v))
	}
	return out
}

func checkContract(name, src string, add func(int, string, string, string)) {
	base := strings.TrimSuffix(name, ".lua")
	lines := strings.SplitN(src, "\n", 3)
	first, line := lines[0], 1
	if strings.HasPrefix(first, "-- Code generated ") && len(lines) > 1 {
		first, line = lines[1], 2
	}
	if !strings.HasPrefix(first, "-- "+base+".lua: ") && !strings.HasPrefix(first, "-- "+base+": ") {
		add(line, "contract", first, fmt.Sprintf("a script starts with a comment naming it: %q", "-- "+base+".lua: ..."))
	}
	var head strings.Builder
	for _, l := range strings.Split(src, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") && strings.TrimSpace(l) != "" {
			break
		}
		head.WriteString(l + "\n")
	}
	for _, want := range []string{"KEYS", "Reply:"} {
		if !strings.Contains(head.String(), want) {
			add(line, "contract", first, "the header comment does not document "+want)
		}
	}
}

// Code returns src with its comments removed and the contents of its string literals
// emptied ('%d' becomes ”), line breaks kept, so that line n of the result is line n of src.
func Code(src string) string {
	var b strings.Builder
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '-' && strings.HasPrefix(src[i:], "--"):
			if lvl, ok := longOpen(src[i+2:]); ok {
				end := longClose(src, i+2+lvl+2, lvl)
				newlines(&b, src[i:end])
				i = end
				continue
			}
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				return b.String()
			}
			i += j
		case c == '\'' || c == '"':
			b.WriteByte(c)
			j := i + 1
			for j < len(src) && src[j] != c && src[j] != '\n' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			b.WriteByte(c)
			if j > len(src) {
				j = len(src)
			}
			newlines(&b, src[i+1:j]) // escaped line breaks
			if j < len(src) && src[j] == c {
				j++ // the closing quote; an unterminated string ends before its line break
			}
			i = j
		case c == '[':
			if lvl, ok := longOpen(src[i:]); ok {
				end := longClose(src, i+lvl+2, lvl)
				b.WriteString("''")
				newlines(&b, src[i:end])
				i = end
				continue
			}
			b.WriteByte(c)
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// longOpen reports whether s starts a long bracket [[ or [=*[, and its level.
func longOpen(s string) (int, bool) {
	if !strings.HasPrefix(s, "[") {
		return 0, false
	}
	j := 1
	for j < len(s) && s[j] == '=' {
		j++
	}
	if j < len(s) && s[j] == '[' {
		return j - 1, true
	}
	return 0, false
}

// longClose returns the index just past the long bracket of level lvl that closes at or
// after from, or len(src).
func longClose(src string, from, lvl int) int {
	closer := "]" + strings.Repeat("=", lvl) + "]"
	if from > len(src) {
		return len(src)
	}
	j := strings.Index(src[from:], closer)
	if j < 0 {
		return len(src)
	}
	return from + j + len(closer)
}

func newlines(b *strings.Builder, s string) {
	b.WriteString(strings.Repeat("\n", strings.Count(s, "\n")))
}

// IsFragment reports whether the repository path rel (slash-separated, from the module
// root) is a fragment that internal/luagen assembles into scripts rather than a script:
// a file in a subdirectory of lua/src/. Fragments have no contract header.
func IsFragment(rel string) bool {
	rest, ok := strings.CutPrefix(rel, "lua/src/")
	return ok && strings.Contains(rest, "/")
}
