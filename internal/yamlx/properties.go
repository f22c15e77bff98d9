package yamlx

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// ParseProperties reads a Java .properties file (the format of Spring Boot's
// application.properties) into documents as [ParseDocuments] does for YAML: every
// "key=value", "key: value" or "key value" line is one dotted key with a string value, so
// that the same relaxed binding applies. It follows java.util.Properties: '#' and '!' start
// comment lines, a line ending in an odd number of backslashes continues on the next one,
// and \t, \n, \r, \f, \uXXXX and \<char> are escapes. As in Spring Boot, a "#---" (or
// "!---") line separates documents. A key given twice in one document is an error, as in
// YAML (java.util.Properties would keep the last one silently). A leading UTF-8 byte order
// mark is skipped.
func ParseProperties(data []byte) ([]Node, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
	if !utf8.Valid(data) {
		return nil, &Error{Path: "(document)", Line: firstInvalidLine(data), Msg: "is not valid UTF-8"}
	}
	ex := &expander{budget: NodeBudget(len(data))}
	var out []Node
	doc := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: 1}
	flush := func() error {
		n, err := ex.expand(doc, "", 0)
		if err != nil {
			return err
		}
		out = append(out, Node{Value: n})
		return nil
	}
	seen := map[string]int{}
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := strings.TrimRight(lines[i], "\r")
		trimmed := strings.TrimLeft(line, " \t\f")
		if trimmed == "#---" || trimmed == "!---" {
			if err := flush(); err != nil {
				return nil, err
			}
			doc = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: lineNo + 1}
			seen = map[string]int{}
			continue
		}
		if trimmed == "" || trimmed[0] == '#' || trimmed[0] == '!' {
			continue
		}
		// Join continuation lines.
		logical := trimmed
		for continues(logical) && i+1 < len(lines) {
			logical = logical[:len(logical)-1] + strings.TrimLeft(strings.TrimRight(lines[i+1], "\r"), " \t\f")
			i++
		}
		if continues(logical) {
			logical = logical[:len(logical)-1]
		}
		rawKey, rawVal := splitProperty(logical)
		key, err := unescape(rawKey)
		if err != nil {
			return nil, &Error{Path: rawKey, Line: lineNo, Msg: err.Error()}
		}
		val, err := unescape(rawVal)
		if err != nil {
			return nil, &Error{Path: key, Line: lineNo, Msg: err.Error()}
		}
		if key == "" {
			return nil, &Error{Path: "(document)", Line: lineNo, Msg: "a property needs a key"}
		}
		if prev, dup := seen[key]; dup {
			return nil, &Error{Path: key, Line: lineNo, Msg: fmt.Sprintf("is set twice (also at line %d)", prev)}
		}
		seen[key] = lineNo
		doc.Content = append(doc.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key, Line: lineNo, Column: 1},
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: val, Line: lineNo, Column: 1})
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// continues reports whether a line ends in an odd number of backslashes.
func continues(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitProperty splits a logical line at the first unescaped '=', ':' or whitespace; the
// separator's surrounding whitespace is dropped.
func splitProperty(s string) (key, val string) {
	i := 0
	for i < len(s) {
		c := s[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		i++
	}
	if i > len(s) {
		i = len(s)
	}
	key = s[:i]
	rest := strings.TrimLeft(s[i:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') && (i == len(s) || s[i] == ' ' || s[i] == '\t' || s[i] == '\f' || s[i] == '=' || s[i] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return key, rest
}

// unescape resolves the escapes of java.util.Properties.
func unescape(s string) (string, error) {
	if strings.IndexByte(s, '\\') < 0 {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			break
		}
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\u escape")
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\u escape \\u%s", s[i+1:i+5])
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

func firstInvalidLine(data []byte) int {
	line := 1
	for len(data) > 0 {
		r, size := utf8.DecodeRune(data)
		if r == utf8.RuneError && size <= 1 {
			return line
		}
		if r == '\n' {
			line++
		}
		data = data[size:]
	}
	return line
}
