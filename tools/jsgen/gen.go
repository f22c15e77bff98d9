package main

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/core"
	"github.com/redstream-go/redstream/internal/corekit"
	"github.com/redstream-go/redstream/internal/coreops"
	"github.com/redstream-go/redstream/lua"
	"github.com/redstream-go/redstream/redisbackend"
)

// file is one generated file, its path relative to the package directory.
type file struct {
	path string
	data []byte
}

// recorder is a rueidis.Client that records the commands of Do and DoMulti, except the
// topology look-ups (CLUSTER ...) an engine makes on a cluster client for its per-node
// breakers: they are not part of any decision and come at times of their own.
type recorder struct {
	rueidis.Client
	mu   sync.Mutex
	cmds [][]string
}

func (r *recorder) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if c := cmd.Commands(); len(c) == 0 || c[0] != "CLUSTER" {
		r.mu.Lock()
		r.cmds = append(r.cmds, slices.Clone(c))
		r.mu.Unlock()
	}
	return r.Client.Do(ctx, cmd)
}

func (r *recorder) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	r.mu.Lock()
	for _, c := range cmds {
		r.cmds = append(r.cmds, slices.Clone(c.Commands()))
	}
	r.mu.Unlock()
	return r.Client.DoMulti(ctx, cmds...)
}

// take returns the commands recorded since the last take.
func (r *recorder) take() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cmds
	r.cmds = nil
	return c
}

// Call is one command a Go engine sent: a script call (Script, Keys, Args) or a plain
// command (Command: its words).
type Call struct {
	Script  string   `json:"script,omitempty"`
	Keys    []string `json:"keys,omitempty"`
	Args    []string `json:"args,omitempty"`
	Command []string `json:"command,omitempty"`
}

// MarshalJSON writes a script call with its keys and args (even when empty), a plain
// command with its words only.
func (c Call) MarshalJSON() ([]byte, error) {
	if c.Script == "" {
		return json.Marshal(struct {
			Command []string `json:"command"`
		}{c.Command})
	}
	return json.Marshal(struct {
		Script string   `json:"script"`
		Keys   []string `json:"keys"`
		Args   []string `json:"args"`
	}{c.Script, c.Keys, c.Args})
}

// scriptNames maps the SHA-1 (and the source) of every script to its name.
var scriptNames = func() map[string]string {
	m := map[string]string{}
	for _, s := range lua.Scripts() {
		sum := sha1.Sum([]byte(s.Source))
		m[hex.EncodeToString(sum[:])] = s.Name
		m[s.Source] = s.Name
	}
	return m
}()

// calls normalizes recorded commands: a script call by its script name (EVAL, EVALSHA and
// their _RO forms alike; a repeat of the same call, a retry, is dropped).
func calls(cmds [][]string) ([]Call, error) {
	var out []Call
	for _, c := range cmds {
		switch strings.ToUpper(c[0]) {
		case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO":
			name, ok := scriptNames[c[1]]
			if !ok {
				return nil, fmt.Errorf("a script call of an unknown script %.40q", c[1])
			}
			nk, err := strconv.Atoi(c[2])
			if err != nil {
				return nil, err
			}
			call := Call{Script: name, Keys: slices.Clone(c[3 : 3+nk]), Args: slices.Clone(c[3+nk:])}
			if call.Keys == nil {
				call.Keys = []string{}
			}
			if call.Args == nil {
				call.Args = []string{}
			}
			if n := len(out); n > 0 && out[n-1].Script == name && slices.Equal(out[n-1].Keys, call.Keys) && slices.Equal(out[n-1].Args, call.Args) {
				continue
			}
			out = append(out, call)
		case "SCRIPT":
		default:
			out = append(out, Call{Command: slices.Clone(c)})
		}
	}
	return out, nil
}

// Spec is a limiter spec in the package's units: the bucket's capacity and rate per second,
// or the window in microseconds and the limit.
type Spec struct {
	Algorithm string  `json:"algorithm"`
	Capacity  float64 `json:"capacity,omitempty"`
	Rate      float64 `json:"rate,omitempty"`
	WindowUs  int64   `json:"windowUs,omitempty"`
	Limit     int64   `json:"limit,omitempty"`
}

// LimiterVector is one decision of a redisbackend.Limiter.
type LimiterVector struct {
	Spec     *Spec    `json:"spec,omitempty"`
	Prefix   string   `json:"prefix"`
	MarginUs int64    `json:"marginUs"`
	Key      string   `json:"key"`
	Now      *int64   `json:"now"` // µs; null for the server's TIME
	N        int64    `json:"n"`
	Ints     []string `json:"ints"` // coreops.Ints of the spec
	// Multi holds the specs of a multi-limit limiter (Spec is then empty), MultiInts their ints.
	Multi     []Spec     `json:"multi,omitempty"`
	MultiInts [][]string `json:"multiInts,omitempty"`
	// Fingerprint is the fingerprint of the spec (see fingerprint), the role of its keys.
	Fingerprint string   `json:"fingerprint"`
	RedisKeys   []string `json:"redisKeys"`
	Calls       []Call   `json:"calls"`
}

// DedupVector is one operation of a redisbackend deduplicator.
type DedupVector struct {
	Strategy   string   `json:"strategy"`
	Name       string   `json:"name"`
	Prefix     string   `json:"prefix"`
	WindowUs   int64    `json:"windowUs,omitempty"`
	SetTTLUs   int64    `json:"setTtlUs,omitempty"`
	Insertions int64    `json:"insertions,omitempty"`
	FPRate     float64  `json:"fpRate,omitempty"`
	Shards     int      `json:"shards,omitempty"`
	Op         string   `json:"op"`
	Elements   []string `json:"elements"`
	Now        *int64   `json:"now"`
	RedisKeys  []string `json:"redisKeys"`
	Calls      []Call   `json:"calls"`
}

// Vectors is schema-vectors.json.
type Vectors struct {
	Comment  string          `json:"comment"`
	Limiters []LimiterVector `json:"limiters"`
	Dedups   []DedupVector   `json:"dedups"`
}

// AlgorithmSchema is how one algorithm runs on Redis: its single-limit script's ARGV is
// now, n, the Ints, the margin and Extra; or, with ViaMulti (an algorithm without a
// single-limit script of its own), multi.lua's with one limit: now, n, the margin, the
// algorithm's code and its Ints padded with "0".
type AlgorithmSchema struct {
	Prefix   string   `json:"prefix"`
	Script   string   `json:"script"`
	Ints     int      `json:"ints"`
	Extra    []string `json:"extra"`
	ViaMulti bool     `json:"viaMulti"`
}

// MultiSchema is how a multi-limit limiter runs: ARGV is now, n, the margin, then per limit
// its algorithm's code and Params integers (padded with "0"); limit i's key role is
// "m<i>." + its fingerprint.
type MultiSchema struct {
	Prefix string            `json:"prefix"`
	Script string            `json:"script"`
	Codes  map[string]string `json:"codes"`
	Params int               `json:"params"`
}

// Schema is schema.ts's table.
type Schema struct {
	Algorithms      map[string]AlgorithmSchema `json:"algorithms"`
	DedupPrefix     string                     `json:"dedupPrefix"`
	MaxPlainTag     int                        `json:"maxPlainTag"`
	RoleSet         string                     `json:"roleSet"`
	RoleWindow      string                     `json:"roleWindow"`
	RoleWindowMark  string                     `json:"roleWindowMark"`
	BloomRole       string                     `json:"bloomRole"`
	DedupScripts    map[string]string          `json:"dedupScripts"`
	Multi           MultiSchema                `json:"multi"`
	KeyTTLMarginUs  int64                      `json:"keyTtlMarginUs"`
	DefaultMarginUs int64                      `json:"defaultMarginUs"`
}

const t0 = 1767225600123456 // 2026-01-01T00:00:00.123456Z in µs

type gen struct {
	rec *recorder
	ctx context.Context
}

func generate() ([]file, error) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, err
	}
	defer m.Close()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Every script is loaded first, so each call is one EVALSHA.
	for _, s := range lua.Scripts() {
		if err := c.Do(ctx, c.B().ScriptLoad().Script(s.Source).Build()).Error(); err != nil {
			return nil, fmt.Errorf("SCRIPT LOAD %s: %w", s.Name, err)
		}
	}
	g := &gen{rec: &recorder{Client: c}, ctx: ctx}

	schema, err := g.schema()
	if err != nil {
		return nil, err
	}
	vec := Vectors{Comment: "Code generated by tools/jsgen from redisbackend; DO NOT EDIT."}
	if vec.Limiters, err = g.limiterVectors(); err != nil {
		return nil, err
	}
	if vec.Dedups, err = g.dedupVectors(); err != nil {
		return nil, err
	}
	vj, err := marshal(vec)
	if err != nil {
		return nil, err
	}
	mv, err := memoryVectors()
	if err != nil {
		return nil, err
	}
	mj, err := compact(mv)
	if err != nil {
		return nil, err
	}
	sj, err := json.MarshalIndent(schema, "", "  ")
	if err != nil {
		return nil, err
	}
	var schemaTS bytes.Buffer
	schemaTS.WriteString("// Code generated by tools/jsgen from redisbackend; DO NOT EDIT.\n")
	schemaTS.WriteString("// The key schema and ARGV layout of redstream's Redis engine, read off the calls it sends.\n\n")
	schemaTS.WriteString("/** The Redis key schema and script arguments shared with the Go engine. */\n")
	schemaTS.WriteString("export const schema = ")
	schemaTS.Write(sj)
	schemaTS.WriteString(" as const;\n")

	scriptsTS, err := scriptsFile()
	if err != nil {
		return nil, err
	}
	return []file{
		{"src/generated/algorithms.ts", algorithmsFile()},
		{"src/generated/scripts.ts", scriptsTS},
		{"src/generated/schema.ts", schemaTS.Bytes()},
		{"test/generated/schema-vectors.json", vj},
		{"test/generated/memory-vectors.json", mj},
	}, nil
}

// marshal writes v as indented JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetIndent("", " ")
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// compact writes v as JSON, one top-level vector per line.
func compact(v MemoryVectors) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("{\"comment\": ")
	c, _ := jsString(v.Comment)
	b.WriteString(c)
	for _, part := range []struct {
		name string
		n    int
		item func(int) any
	}{
		{"limiters", len(v.Limiters), func(i int) any { return v.Limiters[i] }},
		{"windows", len(v.Windows), func(i int) any { return v.Windows[i] }},
	} {
		fmt.Fprintf(&b, ",\n%q: [\n", part.name)
		for i := range part.n {
			j, err := json.Marshal(part.item(i))
			if err != nil {
				return nil, err
			}
			b.Write(j)
			if i < part.n-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString("]")
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

// jsString returns s as a JavaScript string literal (JSON is one).
func jsString(s string) (string, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(s); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func scriptsFile() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by tools/jsgen from package lua (lua.Scripts); DO NOT EDIT.\n")
	b.WriteString("// The Lua scripts of redstream's Redis engine, byte for byte.\n\n")
	b.WriteString("/** One Lua script of redstream's Redis engine. */\n")
	b.WriteString("export interface ScriptSource {\n  /** The script's name (its file name without .lua). */\n  readonly name: string;\n")
	b.WriteString("  /** The script text. */\n  readonly source: string;\n  /** SHA-1 of the source, hex: the name EVALSHA knows it by. */\n  readonly sha1: string;\n")
	b.WriteString("  /** The script writes nothing. */\n  readonly readOnly: boolean;\n}\n\n")
	b.WriteString("/** Every script, by name. */\nexport const scripts: Readonly<Record<string, ScriptSource>> = {\n")
	for _, s := range lua.Scripts() {
		sum := sha1.Sum([]byte(s.Source))
		src, err := jsString(s.Source)
		if err != nil {
			return nil, err
		}
		name, _ := jsString(s.Name)
		fmt.Fprintf(&b, "  %s: {\n    name: %s,\n    sha1: %q,\n    readOnly: %t,\n    source: %s,\n  },\n", name, name, hex.EncodeToString(sum[:]), s.ReadOnly, src)
	}
	b.WriteString("};\n")
	return b.Bytes(), nil
}

func specOf(s redstream.Spec) Spec {
	return Spec{Algorithm: string(s.Algorithm), Capacity: s.Capacity, Rate: s.Rate, WindowUs: s.Window.Microseconds(), Limit: s.Limit}
}

func intsOf(s redstream.Spec) ([]string, error) {
	p, err := s.Core()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, x := range coreops.Ints(p) {
		out = append(out, strconv.FormatInt(x, 10))
	}
	return out, nil
}

// decide runs one decision and returns its vector.
func (g *gen) decide(spec redstream.Spec, prefix string, margin time.Duration, key string, now *int64, n int64) (LimiterVector, error) {
	l, err := redisbackend.NewLimiter(g.rec, spec, redisbackend.Options{KeyPrefix: prefix, ExpiryMargin: margin})
	if err != nil {
		return LimiterVector{}, err
	}
	g.flush()
	var at time.Time
	if now != nil {
		at = time.UnixMicro(*now)
	}
	if _, err := l.AllowN(g.ctx, key, at, n); err != nil {
		return LimiterVector{}, fmt.Errorf("%v key %q: %w", spec, key, err)
	}
	cs, err := calls(g.rec.take())
	if err != nil {
		return LimiterVector{}, err
	}
	ints, err := intsOf(spec)
	if err != nil {
		return LimiterVector{}, err
	}
	m := margin
	if m == 0 {
		m = redisbackend.DefaultExpiryMargin
	}
	p, _ := spec.Core()
	sp := specOf(spec)
	return LimiterVector{Spec: &sp, Prefix: prefix, MarginUs: m.Microseconds(), Key: key, Now: now, N: n,
		Ints: ints, Fingerprint: fingerprint(p), RedisKeys: l.Keys(key), Calls: cs}, nil
}

// flush empties the server (so state of one vector never meets another's) and forgets the
// recorded commands.
func (g *gen) flush() {
	g.rec.Client.Do(g.ctx, g.rec.Client.B().Flushall().Build())
	g.rec.take()
}

func ptr(x int64) *int64 { return &x }

// shapeNames are the TypeScript names of core's parameter shapes.
var shapeNames = map[core.Shape]string{core.Bucket: "bucket", core.Window: "window"}

// algorithmsFile returns js/src/generated/algorithms.ts: the rows of core's registry, in
// its order (a row's index is the alg argument of the core module's limit exports). It
// panics on a shape shapeNames lacks, which TestShapeNames rules out.
func algorithmsFile() []byte {
	var b bytes.Buffer
	b.WriteString("// Code generated by tools/jsgen from package core (core.Algorithms); DO NOT EDIT.\n\n")
	b.WriteString("/**\n * The rows of Go's algorithm registry (core.Algorithms), in its order: a row's index is the\n")
	b.WriteString(" * alg argument of the core module's limit exports (wasmcore/ABI.md). shape names the fields\n")
	b.WriteString(" * of a Spec it reads; words is how many state words it uses (0: its state is a log);\n")
	b.WriteString(" * settles is whether it settles reservations (core.Algorithm.Settles).\n */\n")
	b.WriteString("export const registry = [\n")
	for _, a := range core.Algorithms() {
		sh, ok := shapeNames[a.Shape]
		if !ok {
			panic(fmt.Sprintf("jsgen: algorithm %q has shape %d, which shapeNames lacks", a.Name, a.Shape))
		}
		fmt.Fprintf(&b, "  { name: %q, shape: %q, words: %d, settles: %v },\n", a.Name, sh, a.Words, a.Settles())
	}
	b.WriteString("] as const;\n")
	return b.Bytes()
}

// specs returns two specs of each algorithm of core's registry, in the fields of its shape.
func specs() []redstream.Spec {
	var out []redstream.Spec
	for _, a := range redstream.Algorithms() {
		if row, _ := core.Lookup(string(a)); row.Shape == core.Bucket {
			out = append(out, redstream.Spec{Algorithm: a, Capacity: 10, Rate: 5}, redstream.Spec{Algorithm: a, Capacity: 3.7, Rate: 0.3})
		} else {
			out = append(out, redstream.Spec{Algorithm: a, Window: time.Second, Limit: 10}, redstream.Spec{Algorithm: a, Window: 90*time.Minute + 123*time.Microsecond, Limit: 1000})
		}
	}
	return out
}

// keys are user keys covering every branch of the key schema.
var keys = []string{
	"user:1", "a", strings.Repeat("k", 128), strings.Repeat("k", 129), "{tag}", "x}y", "has space",
	"#hash", "ünïcode", "line\nbreak", "\x00\x7f", "tab\t", "~!@$%^&*()",
}

func (g *gen) limiterVectors() ([]LimiterVector, error) {
	var out []LimiterVector
	for i, s := range specs() {
		for j, k := range keys {
			prefix := ""
			if (i+j)%3 == 0 {
				prefix = "app:limits"
			}
			var margin time.Duration
			if (i+j)%4 == 1 {
				margin = 2500*time.Millisecond + time.Microsecond
			}
			now := ptr(t0 + int64(j)*1000)
			if j%5 == 4 {
				now = nil
			}
			v, err := g.decide(s, prefix, margin, k, now, int64(1+j%2))
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
	}
	all := specs()
	for j, k := range keys {
		ss := []redstream.Spec{all[j%len(all)], all[(j+3)%len(all)], all[(j+7)%len(all)]}
		if j%4 == 0 {
			ss = ss[:1]
		}
		prefix := ""
		if j%3 == 0 {
			prefix = "app:multi"
		}
		var now *int64
		if j%5 != 4 {
			now = ptr(t0 + int64(j)*1000)
		}
		v, err := g.decideMulti(ss, prefix, time.Duration(j%2)*1500*time.Millisecond, k, now, 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (g *gen) schema() (Schema, error) {
	s := Schema{Algorithms: map[string]AlgorithmSchema{}, DedupScripts: map[string]string{},
		KeyTTLMarginUs: corekit.KeyTTLMargin, DefaultMarginUs: redisbackend.DefaultExpiryMargin.Microseconds()}
	for _, spec := range specs() {
		v, err := g.decide(spec, "", 0, "k", ptr(t0), 1)
		if err != nil {
			return s, err
		}
		if len(v.Calls) != 1 || v.Calls[0].Script == "" {
			return s, fmt.Errorf("%v: want one script call, got %+v", spec, v.Calls)
		}
		c := v.Calls[0]
		l, _ := redisbackend.NewLimiter(g.rec, spec, redisbackend.Options{})
		prefix := l.KeyPrefix()
		cl, _ := spec.Core()
		if fp := fingerprint(cl); fp != strings.Join(append([]string{cl.Name()}, v.Ints...), ".") {
			return s, fmt.Errorf("%v: fingerprint %q is no longer the name and the ints joined by '.': update tools/jsgen and js/src/keys.ts", spec, fp)
		}
		if !slices.Equal(c.Keys, []string{prefix + ":{k}:" + fingerprint(cl)}) {
			return s, fmt.Errorf("%v: keys %q: the key schema changed; update tools/jsgen and js/src/keys.ts", spec, c.Keys)
		}
		ni := len(v.Ints)
		if c.Script == "multi" {
			row, err := core.Lookup(cl.Name())
			if err != nil {
				return s, err
			}
			want := append([]string{strconv.FormatInt(t0, 10), "1", "1000", row.Code}, v.Ints...)
			for len(want) < 7 {
				want = append(want, "0")
			}
			if !slices.Equal(c.Args, want) {
				return s, fmt.Errorf("%v: ARGV %q is not multi.lua's with one limit (%q): update tools/jsgen and js/src/redis.ts", spec, c.Args, want)
			}
			s.Algorithms[string(spec.Algorithm)] = AlgorithmSchema{Prefix: prefix, Script: c.Script, Ints: ni, Extra: []string{}, ViaMulti: true}
			continue
		}
		want := append(append([]string{strconv.FormatInt(t0, 10), "1"}, v.Ints...), "1000")
		if len(c.Args) < len(want) || !slices.Equal(c.Args[:len(want)], want) {
			return s, fmt.Errorf("%v: ARGV %q does not start with now, n, the core ints and the margin (%q): update tools/jsgen and js/src/redis.ts", spec, c.Args, want)
		}
		a := AlgorithmSchema{Prefix: prefix, Script: c.Script, Ints: ni, Extra: slices.Clone(c.Args[len(want):])}
		if a.Extra == nil {
			a.Extra = []string{}
		}
		if old, ok := s.Algorithms[string(spec.Algorithm)]; ok && (old.Script != a.Script || !slices.Equal(old.Extra, a.Extra)) {
			return s, fmt.Errorf("%v: the layout depends on the parameters", spec)
		}
		s.Algorithms[string(spec.Algorithm)] = a
	}
	// The longest plain user key: the schema keeps it as its own tag.
	for n := 1; n <= 4096; n++ {
		l, _ := redisbackend.NewLimiter(g.rec, redstream.TokenBucket(1, 1), redisbackend.Options{KeyPrefix: "p"})
		u := strings.Repeat("k", n)
		if !strings.HasPrefix(l.Keys(u)[0], "p:{"+u+"}:") {
			s.MaxPlainTag = n - 1
			break
		}
	}
	if s.MaxPlainTag == 0 {
		return s, errors.New("no plain user key found")
	}

	set, err := newRedisSet(g.rec, "n", redisbackend.DedupOptions{})
	if err != nil {
		return s, err
	}
	sk := set.Key()
	i := strings.Index(sk, ":{n}:")
	if i < 0 {
		return s, fmt.Errorf("set key %q: the key schema changed", sk)
	}
	s.DedupPrefix, s.RoleSet = sk[:i], sk[i+len(":{n}:"):]
	win, err := newRedisWindow(g.rec, "n", time.Second, redisbackend.DedupOptions{})
	if err != nil {
		return s, err
	}
	wk := win.Keys()
	role := func(k string) (string, error) {
		p := s.DedupPrefix + ":{n}:"
		if !strings.HasPrefix(k, p) {
			return "", fmt.Errorf("key %q: the key schema changed", k)
		}
		return k[len(p):], nil
	}
	if s.RoleWindow, err = role(wk[0]); err != nil {
		return s, err
	}
	if s.RoleWindowMark, err = role(wk[1]); err != nil {
		return s, err
	}
	// The Bloom role template, checked on two sizings.
	s.BloomRole = "bf.{k}.{shardBits}.{shards}"
	for _, sp := range []redstream.DedupSpec{{Insertions: 1000, FPRate: 0.01}, {Insertions: 12345, FPRate: 0.001, Shards: 3}} {
		b, err := newRedisBloom(g.rec, "n", sp, redisbackend.DedupOptions{})
		if err != nil {
			return s, err
		}
		p := b.Params()
		r := strings.NewReplacer("{k}", strconv.Itoa(p.K), "{shardBits}", strconv.FormatUint(p.ShardBits, 10), "{shards}", strconv.Itoa(p.Shards)).Replace(s.BloomRole)
		name := "n"
		if p.Shards > 1 {
			name = "n/0"
		}
		if got := b.Keys()[0]; got != s.DedupPrefix+":{"+name+"}:"+r {
			return s, fmt.Errorf("bloom key %q, want role %q: the key schema changed", got, r)
		}
	}
	// The scripts of the deduplicators' operations.
	for _, op := range []struct {
		name string
		run  func() error
	}{
		{"set", func() error { _, err := set.CheckAndMark(g.ctx, "e"); return err }},
		{"window", func() error { _, err := win.CheckAndMarkAt(g.ctx, "e", time.UnixMicro(t0)); return err }},
		{"windowCheck", func() error { _, err := win.IsDuplicateAt(g.ctx, "e", time.UnixMicro(t0)); return err }},
		{"bloomAdd", func() error {
			b, err := newRedisBloom(g.rec, "n", redstream.DedupSpec{Insertions: 10, FPRate: 0.1}, redisbackend.DedupOptions{})
			if err != nil {
				return err
			}
			_, err = b.CheckAndMark(g.ctx, "e")
			return err
		}},
		{"bloomExists", func() error {
			b, err := newRedisBloom(g.rec, "n", redstream.DedupSpec{Insertions: 10, FPRate: 0.1}, redisbackend.DedupOptions{})
			if err != nil {
				return err
			}
			_, err = b.IsDuplicate(g.ctx, "e")
			return err
		}},
		{"bloomCount", func() error {
			b, err := newRedisBloom(g.rec, "n", redstream.DedupSpec{Insertions: 10, FPRate: 0.1}, redisbackend.DedupOptions{})
			if err != nil {
				return err
			}
			_, err = b.Count(g.ctx)
			return err
		}},
	} {
		g.rec.take()
		if err := op.run(); err != nil {
			return s, fmt.Errorf("%s: %w", op.name, err)
		}
		cs, err := calls(g.rec.take())
		if err != nil {
			return s, err
		}
		if len(cs) != 1 || cs[0].Script == "" {
			return s, fmt.Errorf("%s: want one script call, got %+v", op.name, cs)
		}
		s.DedupScripts[op.name] = cs[0].Script
	}
	if s.Multi, err = g.multiSchema(); err != nil {
		return s, err
	}
	return s, nil
}

// multiSchema reads the multi-limit layout off one call with a limit of every algorithm.
func (g *gen) multiSchema() (MultiSchema, error) {
	var ss []redstream.Spec
	for i, sp := range specs() {
		if i%2 == 0 {
			ss = append(ss, sp)
		}
	}
	v, err := g.decideMulti(ss, "", 0, "k", ptr(t0), 1)
	if err != nil {
		return MultiSchema{}, err
	}
	if len(v.Calls) != 1 || v.Calls[0].Script == "" {
		return MultiSchema{}, fmt.Errorf("multi: want one script call, got %+v", v.Calls)
	}
	c := v.Calls[0]
	l, _ := redisbackend.NewMultiLimiter(g.rec, ss, redisbackend.Options{})
	m := MultiSchema{Prefix: l.KeyPrefix(), Script: c.Script, Codes: map[string]string{}, Params: 3}
	if len(c.Args) != 3+4*len(ss) || c.Args[0] != strconv.FormatInt(t0, 10) || c.Args[1] != "1" || c.Args[2] != "1000" {
		return m, fmt.Errorf("multi: ARGV %q is not now, n, margin and 4 per limit: update tools/jsgen and js/src/redis.ts", c.Args)
	}
	for i, sp := range ss {
		p, _ := sp.Core()
		group := c.Args[3+4*i : 7+4*i]
		ints := v.MultiInts[i]
		for len(ints) < m.Params {
			ints = append(ints, "0")
		}
		if !slices.Equal(group[1:], ints) {
			return m, fmt.Errorf("multi: limit %d ARGV %q, want a code then %q", i, group, ints)
		}
		m.Codes[p.Name()] = group[0]
		if want := m.Prefix + ":{k}:m" + strconv.Itoa(i) + "." + fingerprint(p); c.Keys[i] != want {
			return m, fmt.Errorf("multi: key %q, want %q: update tools/jsgen and js/src/redis.ts", c.Keys[i], want)
		}
	}
	return m, nil
}

// decideMulti runs one decision of a multi-limit limiter and returns its vector.
func (g *gen) decideMulti(ss []redstream.Spec, prefix string, margin time.Duration, key string, now *int64, n int64) (LimiterVector, error) {
	l, err := redisbackend.NewMultiLimiter(g.rec, ss, redisbackend.Options{KeyPrefix: prefix, ExpiryMargin: margin})
	if err != nil {
		return LimiterVector{}, err
	}
	g.flush()
	var at time.Time
	if now != nil {
		at = time.UnixMicro(*now)
	}
	if _, err := l.AllowN(g.ctx, key, at, n); err != nil {
		return LimiterVector{}, fmt.Errorf("multi key %q: %w", key, err)
	}
	cs, err := calls(g.rec.take())
	if err != nil {
		return LimiterVector{}, err
	}
	m := margin
	if m == 0 {
		m = redisbackend.DefaultExpiryMargin
	}
	v := LimiterVector{Prefix: prefix, MarginUs: m.Microseconds(), Key: key, Now: now, N: n, RedisKeys: l.Keys(key), Calls: cs}
	for _, sp := range ss {
		ints, err := intsOf(sp)
		if err != nil {
			return v, err
		}
		v.Multi = append(v.Multi, specOf(sp))
		v.MultiInts = append(v.MultiInts, ints)
	}
	return v, nil
}

func (g *gen) dedupVectors() ([]DedupVector, error) {
	var out []DedupVector
	names := []string{"orders", "{weird} name", "ünï", strings.Repeat("n", 129)}
	elements := []string{"a", "", "b", "a", "ü", strings.Repeat("x", 100), "{e}"}
	record := func(v DedupVector, run func() error) error {
		g.rec.take()
		if v.Op != "clear" && v.Op != "isDuplicate" && v.Op != "isDuplicateBatch" && v.Op != "uniqueCount" && v.Op != "count" && v.Op != "remove" {
			g.flush()
		}
		if err := run(); err != nil {
			return fmt.Errorf("%s %s %q: %w", v.Strategy, v.Op, v.Name, err)
		}
		cs, err := calls(g.rec.take())
		if err != nil {
			return err
		}
		v.Calls = cs
		if v.Calls == nil {
			v.Calls = []Call{}
		}
		out = append(out, v)
		return nil
	}
	for i, name := range names {
		prefix := ""
		if i%2 == 1 {
			prefix = "app:dd"
		}
		ttl := time.Duration(0)
		if i%2 == 0 {
			ttl = 1500*time.Millisecond + time.Microsecond
		}
		set, err := newRedisSet(g.rec, name, redisbackend.DedupOptions{KeyPrefix: prefix, SetTTL: ttl})
		if err != nil {
			return nil, err
		}
		base := DedupVector{Strategy: "set", Name: name, Prefix: prefix, SetTTLUs: ttl.Microseconds(), RedisKeys: []string{set.Key()}}
		for _, op := range []struct {
			op  string
			els []string
			run func() error
		}{
			{"checkAndMarkBatch", elements, func() error { _, err := set.CheckAndMarkBatch(g.ctx, elements); return err }},
			{"isDuplicate", []string{"a"}, func() error { _, err := set.IsDuplicate(g.ctx, "a"); return err }},
			{"remove", []string{"a"}, func() error { return set.Remove(g.ctx, "a") }},
			{"uniqueCount", []string{}, func() error { _, err := set.UniqueCount(g.ctx); return err }},
			{"clear", []string{}, func() error { return set.Clear(g.ctx) }},
		} {
			v := base
			v.Op, v.Elements = op.op, op.els
			if err := record(v, op.run); err != nil {
				return nil, err
			}
		}

		window := []time.Duration{time.Hour, 1500*time.Millisecond + 7*time.Microsecond}[i%2]
		win, err := newRedisWindow(g.rec, name, window, redisbackend.DedupOptions{KeyPrefix: prefix})
		if err != nil {
			return nil, err
		}
		for j, now := range []*int64{ptr(t0 + int64(i)), nil} {
			at := time.Time{}
			if now != nil {
				at = time.UnixMicro(*now)
			}
			base := DedupVector{Strategy: "windowed", Name: name, Prefix: prefix, WindowUs: window.Microseconds(), Now: now, RedisKeys: win.Keys()}
			e := elements[(i+j)%len(elements)]
			for _, op := range []struct {
				op  string
				els []string
				run func() error
			}{
				{"checkAndMark", []string{e}, func() error { _, err := win.CheckAndMarkAt(g.ctx, e, at); return err }},
				{"isDuplicate", []string{e}, func() error { _, err := win.IsDuplicateAt(g.ctx, e, at); return err }},
				{"uniqueCount", []string{}, func() error { _, err := win.UniqueCountAt(g.ctx, at); return err }},
				{"clear", []string{}, func() error { return win.Clear(g.ctx) }},
			} {
				v := base
				v.Op, v.Elements = op.op, op.els
				if err := record(v, op.run); err != nil {
					return nil, err
				}
			}
		}

		for _, sp := range []redstream.DedupSpec{{Insertions: 1000, FPRate: 0.01, Shards: i % 3}, {Insertions: 100000, FPRate: 0.001, Shards: 4}} {
			b, err := newRedisBloom(g.rec, name, sp, redisbackend.DedupOptions{KeyPrefix: prefix})
			if err != nil {
				return nil, err
			}
			base := DedupVector{Strategy: "bloom", Name: name, Prefix: prefix, Insertions: sp.Insertions, FPRate: sp.FPRate, Shards: sp.Shards, RedisKeys: b.Keys()}
			for _, op := range []struct {
				op  string
				els []string
				run func() error
			}{
				{"checkAndMarkBatch", elements, func() error { _, err := b.CheckAndMarkBatch(g.ctx, elements); return err }},
				{"isDuplicateBatch", elements, func() error { _, err := b.IsDuplicateBatch(g.ctx, elements); return err }},
				{"count", []string{}, func() error { _, err := b.Count(g.ctx); return err }},
				{"clear", []string{}, func() error { return b.Clear(g.ctx) }},
			} {
				v := base
				v.Op, v.Elements = op.op, op.els
				if err := record(v, op.run); err != nil {
					return nil, err
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Strategy < out[j].Strategy })
	return out, nil
}
