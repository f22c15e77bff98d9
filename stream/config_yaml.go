package stream

import (
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// LoadConfig reads the `redis-stream` section of a YAML document (a Spring-style
// application.yml). A document without that section yields the default Config. Keys may be
// written kebab-case (read-count), camelCase (readCount) or snake_case, nested or dotted
// (autoclaim.min-idle-ms: 100). Unknown keys and bad values are errors naming their key path,
// wrapping redstream.ErrInvalidConfig.
func LoadConfig(yamlBytes []byte) (Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(yamlBytes, &doc); err != nil {
		return Config{}, cfgErr(ConfigSection, "%v", err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return Config{}, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return Config{}, nil
	}
	if root.Kind != yaml.MappingNode {
		return Config{}, cfgErr(ConfigSection, "the document is not a mapping")
	}
	// Collect the section, which may be nested (redis-stream: {...}) or dotted at the root
	// (redis-stream.read-count: 5), or both.
	section := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		head, rest, dotted := strings.Cut(k.Value, ".")
		if normalize(head) != normalize(ConfigSection) {
			continue
		}
		if dotted {
			section.Content = append(section.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: rest, Line: k.Line}, v)
			continue
		}
		switch {
		case v.Kind == yaml.MappingNode:
			section.Content = append(section.Content, v.Content...)
		case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
		default:
			return Config{}, cfgErr(ConfigSection, "want a mapping (line %d)", v.Line)
		}
	}
	return ConfigFromNode(section, ConfigSection)
}

// ConfigFromNode decodes a Config from node, the mapping under the `redis-stream` key, as
// parsed by go.yaml.in/yaml/v3. path is the node's key path, used in error messages
// (ConfigSection when empty). A nil or null node yields the default Config. Keys are
// matched as by LoadConfig; the result is validated.
func ConfigFromNode(node *yaml.Node, path string) (Config, error) {
	if path == "" {
		path = ConfigSection
	}
	var c Config
	if node == nil || (node.Kind == yaml.ScalarNode && node.Tag == "!!null") {
		return c, nil
	}
	if node.Kind == yaml.DocumentNode && len(node.Content) == 1 {
		node = node.Content[0]
	}
	if node.Kind != yaml.MappingNode {
		return c, cfgErr(path, "want a mapping (line %d)", node.Line)
	}
	fields := map[string]func(p string, v *yaml.Node) error{
		"envisolation":         boolField(&c.EnvIsolation),
		"env":                  stringField(&c.Env),
		"consumername":         stringField(&c.ConsumerName),
		"readcount":            intField(&c.ReadCount),
		"blockms":              msField(&c.BlockTimeout),
		"maxretry":             intField(&c.MaxDeliveries),
		"autoclaim.minidlems":  msField(&c.Autoclaim.MinIdle),
		"autoclaim.intervalms": msField(&c.Autoclaim.Interval),
		"trim.maxlen":          int64Field(&c.Trim.MaxLen),
		"trim.intervalms":      msField(&c.Trim.Interval),
		"trim.mode":            func(p string, v *yaml.Node) error { return stringField((*string)(&c.Trim.Mode))(p, v) },
		"deadletter.maxlen":    int64Field(&c.DeadLetter.MaxLen),
		"deadletter.maxagems":  msField(&c.DeadLetter.MaxAge),
		"handlertimeoutms":     msField(&c.HandlerTimeout),
		"shutdowntimeoutms":    msField(&c.ShutdownTimeout),
		"consumertimeoutms":    msField(&c.ConsumerTimeout),
	}
	groups := map[string]bool{"autoclaim": true, "trim": true, "deadletter": true}
	if err := walkConfig(node, path, "", fields, groups); err != nil {
		return Config{}, err
	}
	if err := c.validate(path); err != nil {
		return Config{}, err
	}
	return c, nil
}

// walkConfig visits the leaves of a mapping node. norm is the normalized path of node
// ("" for the section itself); display paths keep the keys as written.
func walkConfig(node *yaml.Node, display, norm string, fields map[string]func(string, *yaml.Node) error, groups map[string]bool) error {
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := node.Content[i], node.Content[i+1]
		parts := strings.Split(k.Value, ".")
		d, n := display, norm
		for j, part := range parts {
			d += "." + part
			if n == "" {
				n = normalize(part)
			} else {
				n += "." + normalize(part)
			}
			if j < len(parts)-1 && !groups[n] {
				return cfgErr(d, "unknown key (line %d)", k.Line)
			}
		}
		if groups[n] {
			switch {
			case v.Kind == yaml.MappingNode:
				if err := walkConfig(v, d, n, fields, groups); err != nil {
					return err
				}
			case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
			default:
				return cfgErr(d, "want a mapping (line %d)", v.Line)
			}
			continue
		}
		set, ok := fields[n]
		if !ok {
			return cfgErr(d, "unknown key (line %d)", k.Line)
		}
		if err := set(d, v); err != nil {
			return err
		}
	}
	return nil
}

// normalize folds a key the way Spring's relaxed binding does: case-insensitive, with '-'
// and '_' ignored, so read-count, readCount and read_count are one key.
func normalize(k string) string {
	k = strings.ToLower(k)
	return strings.NewReplacer("-", "", "_", "").Replace(k)
}

func scalar(p string, v *yaml.Node, want string) (string, bool, error) {
	if v.Kind != yaml.ScalarNode {
		return "", false, cfgErr(p, "want %s (line %d)", want, v.Line)
	}
	if v.Tag == "!!null" {
		return "", false, nil
	}
	return v.Value, true, nil
}

func int64Field(dst *int64) func(string, *yaml.Node) error {
	return func(p string, v *yaml.Node) error {
		s, ok, err := scalar(p, v, "an integer")
		if err != nil || !ok {
			return err
		}
		n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
		if err != nil {
			return cfgErr(p, "want an integer, got %q (line %d)", s, v.Line)
		}
		*dst = n
		return nil
	}
}

// msField reads a number of milliseconds into a time.Duration, refusing values that
// overflow it.
func msField(dst *time.Duration) func(string, *yaml.Node) error {
	return func(p string, v *yaml.Node) error {
		var n int64
		if err := int64Field(&n)(p, v); err != nil {
			return err
		}
		if n > int64(math.MaxInt64/time.Millisecond) || n < int64(math.MinInt64/time.Millisecond) {
			return cfgErr(p, "%d ms is out of range (line %d)", n, v.Line)
		}
		*dst = time.Duration(n) * time.Millisecond
		return nil
	}
}

func intField(dst *int) func(string, *yaml.Node) error {
	return func(p string, v *yaml.Node) error {
		var n int64
		if err := int64Field(&n)(p, v); err != nil {
			return err
		}
		if n != int64(int(n)) || n > 1<<31-1 || n < -(1<<31) {
			return cfgErr(p, "%d is out of range (line %d)", n, v.Line)
		}
		*dst = int(n)
		return nil
	}
}

func boolField(dst *bool) func(string, *yaml.Node) error {
	return func(p string, v *yaml.Node) error {
		s, ok, err := scalar(p, v, "true or false")
		if err != nil || !ok {
			return err
		}
		b, err := strconv.ParseBool(s)
		if err != nil {
			return cfgErr(p, "want true or false, got %q (line %d)", s, v.Line)
		}
		*dst = b
		return nil
	}
}

func stringField(dst *string) func(string, *yaml.Node) error {
	return func(p string, v *yaml.Node) error {
		s, _, err := scalar(p, v, "a string")
		if err != nil {
			return err
		}
		*dst = s
		return nil
	}
}
