package cache

// Tags are lazy, as in FusionCache: InvalidateTag writes one key, and an entry written
// under an older state of one of its tags counts as a miss when it is next read. No key is
// scanned, and nothing needs the entry and its tags in one slot.
//
// Each tag has a generation: a random token in the tag's key (keyspace.tag), absent until
// the tag is first invalidated. InvalidateTag sets a new token. A tagged entry is stored
// as an envelope holding, for each of its tags, the token that tag had before the value
// was loaded (or before Set), then the encoded value:
//
//	"\x00redstream-cache:tagged:" n ":" { len(tag) ":" tag len(token) ":" token }×n value
//
// A read of the envelope reads the current tokens of its tags (through client-side cache
// memory: see tagTokens) and serves the value only when every token is unchanged; otherwise
// the entry is deleted (compare-and-delete, so a newer value is kept) and the read is a miss.
// Comparing tokens rather than clocks needs no clock agreement between processes or cluster
// nodes, and a tag key lost to eviction invalidates its entries instead of reviving them.

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// taggedPrefix starts a tagged entry's envelope.
const taggedPrefix = markerPrefix + "tagged:"

// unknownToken is recorded for a tag whose token could not be read before a load: it
// matches no token, so the entry counts as invalidated on its first read.
const unknownToken = "\x00?"

// maxTags bounds the tags of one entry.
const maxTags = 64

// Tags attaches tags to the value GetOrLoad loads or Set stores: InvalidateTag on any of
// them makes the entry a miss for every later read (Get, GetOrLoad, GetMany). The tags of
// an entry are the ones it was written with; a GetOrLoad hit does not compare them with
// its own. At most 64 non-empty tags; other options of Set are ignored.
func Tags(tags ...string) Option {
	return func(o callOptions) callOptions { o.tags = tags; return o }
}

// checkTags validates the tags of a call.
func checkTags(tags []string) error {
	if len(tags) > maxTags {
		return fmt.Errorf("%w: %d tags, at most %d", ErrInvalidArgument, len(tags), maxTags)
	}
	for _, t := range tags {
		if t == "" {
			return fmt.Errorf("%w: empty tag", ErrInvalidArgument)
		}
	}
	return nil
}

// InvalidateTag makes every entry written with tag (see Tags) before this call a miss for
// every later read, in every process: one write to Redis, however many entries carry the
// tag. Each such entry is deleted by the first read that finds it invalidated; until then
// it stays in Redis (under its TTL), and in process memory with client-side caching. With
// fail-safe, an invalidated entry is still the last known value of its key, served stale
// when reloading it fails, as an expired one would be. A read in another process sees the
// invalidation once Redis's invalidation message reaches it (normally within a
// millisecond; at most ClientSideCache.MaxStaleness later, see tagTokens).
func (c *Cache) InvalidateTag(ctx context.Context, tag string) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if tag == "" {
		return fmt.Errorf("%w: empty tag", ErrInvalidArgument)
	}
	tk := c.keys.tag(tag)
	t, gerr := c.gate(ctx, tk)
	if gerr != nil {
		return fmt.Errorf("cache: invalidate tag %q: %w", tag, gerr)
	}
	token := rand.Text()
	rctx, op := c.callCtx(ctx)
	err := c.client.Do(rctx, c.client.B().Set().Key(tk).Value(token).Build()).Error()
	op.release()
	c.tagOwn.note(tk, token, false)
	if err = c.outcome(ctx, t, err); err != nil {
		return fmt.Errorf("cache: invalidate tag %q: %w", tag, err)
	}
	return nil
}

// tagTokens returns the current token of each tag ("" for a tag never invalidated).
//
// The tag keys are read with client-side caching whatever ClientSideCache.Enabled says: a
// tag is shared by many entries, so its token is nearly always answered from memory, and
// a tagged read costs no extra round trip; Redis invalidates the copy when the token
// changes. A copy lives at most ClientSideCache.MaxStaleness (the bound of copies of
// entries), is refused while client-side caching's heartbeat is not current, and is
// ignored while it disagrees with an InvalidateTag of this process whose invalidation has
// not arrived. A tag not in memory costs one round trip. Without client tracking
// (ClientOption.DisableCache) every tagged read pays a round trip per tag.
func (c *Cache) tagTokens(ctx context.Context, tags []string) ([]string, error) {
	keys := make([]string, len(tags))
	for i, tag := range tags {
		keys[i] = c.keys.tag(tag)
	}
	t, gerr := c.gate(ctx, keys...)
	if gerr != nil {
		return nil, gerr
	}
	mark, pending := c.tagOwn.start()
	current := c.beat == nil || c.beat.current()
	tokens := make([]string, len(tags))
	var again []int
	reached := false
	// One DoCache per tag: a hit costs about 300ns, where a DoMultiCache of two hits costs
	// 10µs in rueidis v1.0.79.
	for i, key := range keys {
		rctx, op := c.callCtx(ctx)
		resp := c.client.DoCache(rctx, c.client.B().Get().Key(key).Cache(), c.cfg.ClientSideCache.MaxStaleness)
		op.release()
		s, err := resp.ToString()
		miss := rueidis.IsRedisNil(err)
		if err != nil && !miss {
			return nil, c.outcome(ctx, t, err)
		}
		local := resp.IsCacheHit()
		reached = reached || !local
		if local && (!current || (pending && c.tagOwn.stale(key, s, miss))) {
			again = append(again, i)
			continue
		}
		if !local && pending {
			c.tagOwn.fromRedis(key, mark)
		}
		tokens[i] = s
	}
	if len(again) > 0 {
		cmds := make(rueidis.Commands, len(again))
		for j, i := range again {
			cmds[j] = c.client.B().Get().Key(keys[i]).Build()
		}
		rctx, op := c.batchCtx(ctx, len(cmds))
		defer op.release()
		for j, resp := range c.client.DoMulti(rctx, cmds...) {
			s, err := resp.ToString()
			if err != nil && !rueidis.IsRedisNil(err) {
				return nil, c.outcome(ctx, t, err)
			}
			tokens[again[j]] = s
		}
		reached = true
	}
	if reached {
		c.outcome(ctx, t, nil)
	}
	return tokens, nil
}

// writeTokens returns the tokens to record for tags before a load or a Set: unknownToken
// for all when they cannot be read, so that the entry is invalidated on its first read
// rather than escaping a later invalidation.
func (c *Cache) writeTokens(ctx context.Context, tags []string) []string {
	tokens, err := c.tagTokens(ctx, tags)
	if err != nil {
		tokens = make([]string, len(tags))
		for i := range tokens {
			tokens[i] = unknownToken
		}
	}
	return tokens
}

// wrapTagged returns the envelope of raw under tags with their tokens.
func wrapTagged(tags, tokens []string, raw []byte) []byte {
	n := len(taggedPrefix) + len(raw) + 8
	for i := range tags {
		n += len(tags[i]) + len(tokens[i]) + 8
	}
	b := make([]byte, 0, n)
	b = append(b, taggedPrefix...)
	b = strconv.AppendInt(b, int64(len(tags)), 10)
	b = append(b, ':')
	for i := range tags {
		for _, s := range [2]string{tags[i], tokens[i]} {
			b = strconv.AppendInt(b, int64(len(s)), 10)
			b = append(b, ':')
			b = append(b, s...)
		}
	}
	return append(b, raw...)
}

// parseTagged splits an envelope into its tags, their tokens and the encoded value. ok is
// false when s is not a well-formed envelope.
func parseTagged(s string) (tags, tokens []string, raw string, ok bool) {
	rest, found := strings.CutPrefix(s, taggedPrefix)
	if !found {
		return nil, nil, "", false
	}
	n, rest, ok := cutLen(rest)
	if !ok || n < 1 || n > maxTags {
		return nil, nil, "", false
	}
	tags, tokens = make([]string, n), make([]string, n)
	for i := range n {
		for _, dst := range [2]*string{&tags[i], &tokens[i]} {
			var l int
			if l, rest, ok = cutLen(rest); !ok || l > len(rest) {
				return nil, nil, "", false
			}
			*dst, rest = rest[:l], rest[l:]
		}
	}
	return tags, tokens, rest, true
}

// cutLen reads a decimal length ending in ':' off the front of s.
func cutLen(s string) (int, string, bool) {
	i := strings.IndexByte(s, ':')
	if i < 1 || i > 9 {
		return 0, "", false
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil || n < 0 {
		return 0, "", false
	}
	return n, s[i+1:], true
}

// open checks a value s that dk holds (of kind k) against its tags: a tagged entry whose
// tags are unchanged gives its encoded value; one invalidated since is deleted and is a
// miss. Anything else is returned as it is (a malformed envelope then fails to decode).
func (c *Cache) open(ctx context.Context, dk, s string, k kind) (string, kind, error) {
	if k != kindValue || !strings.HasPrefix(s, taggedPrefix) {
		return s, k, nil
	}
	tags, tokens, raw, ok := parseTagged(s)
	if !ok {
		return s, k, nil
	}
	cur, err := c.tagTokens(ctx, tags)
	if err != nil {
		return "", kindMiss, err
	}
	for i := range tags {
		if cur[i] != tokens[i] {
			c.dropInvalidated(ctx, dk, s)
			return "", kindMiss, nil
		}
	}
	return raw, kindValue, nil
}

// dropInvalidated deletes dk if it still holds the invalidated envelope s, so that the load
// that follows finds the key empty; a newer value is kept. A failure is only logged: the
// load's lock then finds the old entry and the read retries.
func (c *Cache) dropInvalidated(ctx context.Context, dk, s string) {
	t, gerr := c.gate(ctx, dk)
	if gerr != nil {
		c.background("drop invalidated", gerr)
		return
	}
	wctx, cancel := c.detached(ctx)
	defer cancel()
	n, err := unlockScript.Exec(wctx, c.client, []string{dk}, []string{s}).AsInt64()
	err = c.outcome(context.Background(), t, err)
	c.background("drop invalidated", err)
	if err != nil || n == 1 {
		c.wrote(dk, "", true)
	}
}

// openMany is open for the entries of a GetMany, with the tokens of all their tags read in
// one call.
func (c *Cache) openMany(ctx context.Context, dks []string, ents []entry) error {
	type parsed struct {
		i      int
		tags   []string
		tokens []string
		raw    string
	}
	var (
		todo []parsed
		tags []string
		at   map[string]int
	)
	for i, e := range ents {
		if e.k != kindValue || !strings.HasPrefix(e.s, taggedPrefix) {
			continue
		}
		tg, tk, raw, ok := parseTagged(e.s)
		if !ok {
			continue
		}
		if at == nil {
			at = make(map[string]int)
		}
		for _, t := range tg {
			if _, seen := at[t]; !seen {
				at[t] = len(tags)
				tags = append(tags, t)
			}
		}
		todo = append(todo, parsed{i, tg, tk, raw})
	}
	if len(todo) == 0 {
		return nil
	}
	cur, err := c.tagTokens(ctx, tags)
	if err != nil {
		return err
	}
	var drop []rueidis.LuaExec
	var dropped []string
	for _, p := range todo {
		valid := true
		for j, t := range p.tags {
			valid = valid && cur[at[t]] == p.tokens[j]
		}
		if valid {
			ents[p.i].s = p.raw
			continue
		}
		drop = append(drop, rueidis.LuaExec{Keys: []string{dks[p.i]}, Args: []string{ents[p.i].s}})
		dropped = append(dropped, dks[p.i])
		ents[p.i] = entry{local: ents[p.i].local}
	}
	if len(drop) > 0 {
		c.dropMany(ctx, dropped, drop)
	}
	return nil
}

// dropMany is dropInvalidated for several keys, in one pipeline.
func (c *Cache) dropMany(ctx context.Context, dks []string, execs []rueidis.LuaExec) {
	t, gerr := c.gate(ctx, dks...)
	if gerr != nil {
		c.background("drop invalidated", gerr)
		return
	}
	wctx, cancel := c.detachedN(ctx, len(execs))
	defer cancel()
	resps := c.evalMulti(wctx, unlockSrc, execs)
	c.background("drop invalidated", c.outcome(context.Background(), t, firstErr(resps)))
	for i, dk := range dks {
		if n, err := resps[i].AsInt64(); err != nil || n == 1 {
			c.wrote(dk, "", true)
		}
	}
}

// splitStored sets r.stored to a loaded envelope and r.raw to its value.
func splitStored(r result) result {
	if strings.HasPrefix(r.raw, taggedPrefix) {
		if _, _, raw, ok := parseTagged(r.raw); ok {
			r.stored, r.raw = r.raw, raw
		}
	}
	return r
}
