package cache

// This file builds every Redis key the cache touches.
//
// A cache entry is one Redis string at KeyPrefix [+ Env + ":"] + key: the Java starter's layout, so
// keys written by the Java starter and by this package coincide. The distributed lock of
// GetOrLoad lives in that same key, as a placeholder value (see values.go), not in a second
// key: every command and script touches exactly one key, so the cache is cluster-safe for
// any user key (braces and binary bytes included) without hash tags, and deleting or
// overwriting a key while it is being loaded also discards the load's result.

// keyspace builds the Redis keys of one Cache.
type keyspace struct {
	prefix string // KeyPrefix, plus Env + ":" under env isolation
}

func newKeyspace(cfg *Config) keyspace {
	p := cfg.KeyPrefix
	if cfg.EnvIsolation && cfg.Env != "" {
		p += cfg.Env + ":"
	}
	return keyspace{prefix: p}
}

// data returns the Redis key holding the entry of the user key key.
func (k keyspace) data(key string) string { return k.prefix + key }
