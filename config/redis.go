package config

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/yamlx"
)

// The sections of Spring Boot's Redis connection settings.
const (
	// RedisPath is Spring Boot 3's section.
	RedisPath = "spring.data.redis"
	// legacyRedisPath is Spring Boot 2's section, read when RedisPath is absent.
	legacyRedisPath = "spring.redis"
)

// RedisSettings are Spring Boot's Redis connection settings (spring.data.redis.*, or
// spring.redis.* in Spring Boot 2 files), as the Java application connects. Keys in
// parentheses. [RedisSettings.ClientOption] turns them into a rueidis.ClientOption.
type RedisSettings struct {
	// Set reports whether the file has the section (or the environment sets one of its
	// keys, SPRING_DATA_REDIS_HOST for example).
	Set bool
	// Path is the section the settings were read from (RedisPath, or "spring.redis" in a Spring Boot 2 file).
	Path string
	// URL (url) is a redis:// or rediss:// URL; it overrides Host, Port, Username,
	// Password and, when its path names one, Database, as in Spring Boot.
	URL string
	// Host (host, default "localhost") and Port (port, default 6379) address a single
	// server.
	Host string
	Port int
	// Username (username) and Password (password) authenticate (AUTH, ACL users).
	Username string
	Password string
	// Database (database, default 0) is the database SELECTed on connect.
	Database int
	// SSL (ssl: true in Spring Boot 2, ssl.enabled: true in 3) connects with TLS, verifying
	// the server's certificate against the system roots.
	SSL bool
	// Timeout (timeout; a Spring duration, bare numbers in milliseconds) bounds every
	// command's reply: rueidis ConnWriteTimeout. 0 keeps rueidis's default.
	Timeout time.Duration
	// ConnectTimeout (connect-timeout) bounds dialing: rueidis Dialer.Timeout. 0 keeps
	// rueidis's default.
	ConnectTimeout time.Duration
	// ClientName (client-name) is sent with CLIENT SETNAME.
	ClientName string
	// ClusterNodes (cluster.nodes: a list or a comma-separated string of host:port) are
	// the seed nodes of a Redis Cluster.
	ClusterNodes []string
	// SentinelMaster (sentinel.master) and SentinelNodes (sentinel.nodes) select Redis
	// Sentinel: the client asks the sentinels for the master's address.
	SentinelMaster string
	SentinelNodes  []string
	// SentinelUsername and SentinelPassword (sentinel.username, sentinel.password)
	// authenticate to the sentinels.
	SentinelUsername string
	SentinelPassword string
}

// redisYAML is the section as bound. Keys of Spring's own client settings (pools, client
// type, repositories) are accepted and not used: they configure Lettuce or Jedis.
type redisYAML struct {
	URL            string        `yaml:"url"`
	Host           string        `yaml:"host"`
	Port           int           `yaml:"port"`
	Username       string        `yaml:"username"`
	Password       string        `yaml:"password"`
	Database       int           `yaml:"database"`
	SSL            yamlx.Node    `yaml:"ssl"`
	Timeout        time.Duration `yaml:"timeout" unit:"ms"`
	ConnectTimeout time.Duration `yaml:"connect-timeout" unit:"ms"`
	ClientName     string        `yaml:"client-name"`
	Cluster        struct {
		Nodes        []string `yaml:"nodes"`
		MaxRedirects int      `yaml:"max-redirects"`
	} `yaml:"cluster"`
	Sentinel struct {
		Master   string   `yaml:"master"`
		Nodes    []string `yaml:"nodes"`
		Username string   `yaml:"username"`
		Password string   `yaml:"password"`
	} `yaml:"sentinel"`
	ClientType   yamlx.Node `yaml:"client-type"`
	Lettuce      yamlx.Node `yaml:"lettuce"`
	Jedis        yamlx.Node `yaml:"jedis"`
	Repositories yamlx.Node `yaml:"repositories"`
}

func (l *loader) loadRedis(root yamlx.Node) (RedisSettings, error) {
	sec, err := section(root, RedisPath)
	if err != nil {
		return RedisSettings{}, err
	}
	legacy, err := section(root, legacyRedisPath)
	if err != nil {
		return RedisSettings{}, err
	}
	if sec.Exists() && legacy.Exists() && !legacy.IsNull() {
		if err := l.strict(legacy, "is set next to %s (line %d); Spring Boot 3 reads only %s: move the keys there", RedisPath, sec.Line(), RedisPath); err != nil {
			return RedisSettings{}, err
		}
		l.warn(legacy, "is ignored: "+RedisPath+" is set, and Spring Boot 3 reads only that")
	} else if (!sec.Exists() || sec.IsNull()) && legacy.Exists() && !legacy.IsNull() {
		sec = legacy
	}
	s := RedisSettings{Path: sec.Path}
	var y redisYAML
	fromEnv := false
	bo := l.bindOptions()
	bo.FromEnv = func(path, name string) { fromEnv = true; l.fromEnv[path] = name }
	if err := yamlx.Bind(sec, &y, bo); err != nil {
		return s, err
	}
	if (!sec.Exists() || sec.IsNull()) && !fromEnv {
		return s, nil
	}
	s.Set = true
	s.URL, s.Host, s.Port, s.Username, s.Password, s.Database = y.URL, y.Host, y.Port, y.Username, y.Password, y.Database
	s.Timeout, s.ConnectTimeout, s.ClientName = y.Timeout, y.ConnectTimeout, y.ClientName
	s.ClusterNodes, s.SentinelMaster, s.SentinelNodes = y.Cluster.Nodes, y.Sentinel.Master, y.Sentinel.Nodes
	s.SentinelUsername, s.SentinelPassword = y.Sentinel.Username, y.Sentinel.Password
	if y.SSL.Exists() && !y.SSL.IsNull() {
		if s.SSL, err = l.ssl(y.SSL); err != nil {
			return s, err
		}
	}
	if err := l.checkRedis(s, sec); err != nil {
		return s, err
	}
	return s, nil
}

// ssl reads Spring Boot 2's "ssl: true" and Spring Boot 3's "ssl: {enabled, bundle}".
func (l *loader) ssl(n yamlx.Node) (bool, error) {
	if n.Value.Kind != 0 && n.Value.Tag != "!!map" {
		return n.Bool()
	}
	var y struct {
		Enabled bool   `yaml:"enabled"`
		Bundle  string `yaml:"bundle"`
	}
	if err := yamlx.Bind(n, &y, l.bindOptions()); err != nil {
		return false, err
	}
	if y.Bundle != "" {
		b, _, _ := n.Get("bundle")
		if err := l.strict(b, "names a Spring SSL bundle, which is not read here; set ClientOption.TLSConfig in code (ssl.enabled: true uses the system roots)"); err != nil {
			return false, err
		}
		l.warn(b, "names a Spring SSL bundle, which is not read here; using TLS with the system roots")
		return true, nil
	}
	return y.Enabled, nil
}

// checkRedis validates the settings, reporting errors at their keys.
func (l *loader) checkRedis(s RedisSettings, sec yamlx.Node) error {
	if s.URL != "" {
		if _, err := rueidis.ParseURL(s.URL); err != nil {
			return l.at(sec, "url", "%v", err)
		}
	}
	if s.Port < 0 || s.Port > 65535 {
		return l.at(sec, "port", "must be in [1, 65535], got %d", s.Port)
	}
	if s.Database < 0 {
		return l.at(sec, "database", "must not be negative, got %d", s.Database)
	}
	if s.Timeout < 0 {
		return l.at(sec, "timeout", "must not be negative, got %v", s.Timeout)
	}
	if s.ConnectTimeout < 0 {
		return l.at(sec, "connect-timeout", "must not be negative, got %v", s.ConnectTimeout)
	}
	for _, n := range s.ClusterNodes {
		if _, _, err := splitHostPort(n, 6379); err != nil {
			return l.at(sec, "cluster.nodes", "%v", err)
		}
	}
	for _, n := range s.SentinelNodes {
		if _, _, err := splitHostPort(n, 26379); err != nil {
			return l.at(sec, "sentinel.nodes", "%v", err)
		}
	}
	switch {
	case len(s.ClusterNodes) > 0 && s.SentinelMaster != "":
		return l.at(sec, "sentinel.master", "is set next to cluster.nodes; use one of them")
	case s.SentinelMaster != "" && len(s.SentinelNodes) == 0:
		return l.at(sec, "sentinel.nodes", "must list the sentinels of sentinel.master %q", s.SentinelMaster)
	case s.SentinelMaster == "" && len(s.SentinelNodes) > 0:
		return l.at(sec, "sentinel.master", "must name the master set of sentinel.nodes")
	case len(s.ClusterNodes) > 0 && s.Database != 0:
		return l.at(sec, "database", "must be 0 with cluster.nodes: Redis Cluster has only database 0")
	}
	return nil
}

// splitHostPort reads "host:port" or "host" (with def as port); IPv6 hosts in brackets.
func splitHostPort(addr string, def int) (string, int, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return "", 0, fmt.Errorf("an address is empty")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			return strings.Trim(addr, "[]"), def, nil
		}
		return "", 0, fmt.Errorf("%q is not host:port", addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 || host == "" {
		return "", 0, fmt.Errorf("%q is not host:port with a port in [1, 65535]", addr)
	}
	return host, p, nil
}

// ClientOption returns the rueidis.ClientOption that connects as the Java application
// does: a single server (host, port, or url), a Redis Cluster (cluster.nodes; rueidis
// detects the cluster from the seeds) or Redis Sentinel (sentinel.master and nodes), with
// username, password, database, TLS, timeouts and client name. Fields rueidis defaults are
// left at their zero values; adjust the option (DisableCache, pool sizes) before
// rueidis.NewClient. The client the caller builds is the caller's to close.
func (s RedisSettings) ClientOption() (rueidis.ClientOption, error) {
	var opt rueidis.ClientOption
	host, port := s.Host, s.Port
	if host == "" {
		host = "localhost"
	}
	if port == 0 {
		port = 6379
	}
	opt.InitAddress = []string{net.JoinHostPort(host, strconv.Itoa(port))}
	opt.Username, opt.Password, opt.SelectDB = s.Username, s.Password, s.Database
	tlsHost := host
	if s.URL != "" {
		u, err := rueidis.ParseURL(s.URL)
		if err != nil {
			return opt, fmt.Errorf("config: %s.url: %w", s.Path, err)
		}
		opt.InitAddress, opt.Username, opt.Password = u.InitAddress, u.Username, u.Password
		if u.SelectDB != 0 {
			opt.SelectDB = u.SelectDB
		}
		if u.TLSConfig != nil {
			opt.TLSConfig = u.TLSConfig
		}
		if h, _, err := net.SplitHostPort(u.InitAddress[0]); err == nil {
			tlsHost = h
		}
	}
	switch {
	case len(s.ClusterNodes) > 0:
		opt.InitAddress = nil
		for _, n := range s.ClusterNodes {
			h, p, err := splitHostPort(n, 6379)
			if err != nil {
				return opt, fmt.Errorf("config: %s.cluster.nodes: %w", s.Path, err)
			}
			opt.InitAddress = append(opt.InitAddress, net.JoinHostPort(h, strconv.Itoa(p)))
		}
		tlsHost = ""
	case s.SentinelMaster != "":
		opt.InitAddress = nil
		for _, n := range s.SentinelNodes {
			h, p, err := splitHostPort(n, 26379)
			if err != nil {
				return opt, fmt.Errorf("config: %s.sentinel.nodes: %w", s.Path, err)
			}
			opt.InitAddress = append(opt.InitAddress, net.JoinHostPort(h, strconv.Itoa(p)))
		}
		opt.Sentinel = rueidis.SentinelOption{MasterSet: s.SentinelMaster, Username: s.SentinelUsername, Password: s.SentinelPassword}
		tlsHost = ""
	}
	if s.SSL && opt.TLSConfig == nil {
		opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: tlsHost}
	}
	opt.ConnWriteTimeout = s.Timeout
	opt.Dialer.Timeout = s.ConnectTimeout
	opt.ClientName = s.ClientName
	return opt, nil
}
