package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Connection flags shared by every subcommand that talks to Redis (dlq, streams,
// conformance). Precedence, highest first: a flag given on the command line, the URL
// (--url, else $REDIS_URL where the subcommand reads it), $REDIS_PASSWORD for the
// password, the flag's default.

// Environment variables the connection flags read.
const (
	envRedisURL      = "REDIS_URL"
	envRedisPassword = "REDIS_PASSWORD"
)

// maxCallTimeout bounds each Redis call, whatever --timeout says.
const maxCallTimeout = 10 * time.Second

// connFlags are the parsed connection flags of one subcommand.
type connFlags struct {
	fs          *flag.FlagSet
	defaultAddr string // "" means the subcommand has its own fallback (conformance: miniredis)
	readEnvURL  bool   // whether $REDIS_URL applies when --url is not given
	getenv      func(string) string

	url           string
	addr          string
	cluster       bool
	tls           bool
	tlsCA         string
	tlsCert       string
	tlsKey        string
	tlsInsecure   bool
	tlsServerName string
	user          string
	password      string
	db            int
	timeout       time.Duration
}

// addConnFlags defines the connection flags on fs. defaultAddr is the --redis default;
// readEnvURL tells whether $REDIS_URL is read when --url is not given; timeout is the
// --timeout default (the whole command's deadline).
func addConnFlags(fs *flag.FlagSet, defaultAddr string, readEnvURL bool, timeout time.Duration) *connFlags {
	c := &connFlags{fs: fs, defaultAddr: defaultAddr, readEnvURL: readEnvURL, getenv: os.Getenv}
	redisHelp := "Redis address host:port; comma-separated seeds for a cluster"
	if defaultAddr == "" {
		redisHelp += " (default: the embedded miniredis)"
	}
	urlHelp := "Redis URL redis://[user[:password]@]host[:port][/db][?addr=host:port&db=N], or rediss:// for TLS"
	if readEnvURL {
		urlHelp += " (default $" + envRedisURL + ")"
	}
	fs.StringVar(&c.url, "url", "", urlHelp)
	fs.StringVar(&c.addr, "redis", defaultAddr, redisHelp)
	fs.BoolVar(&c.cluster, "cluster", false, "require a Redis Cluster (fails on a standalone server)")
	fs.BoolVar(&c.tls, "tls", false, "connect with TLS (implied by rediss:// and by the other --tls-* flags)")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "PEM file of the CA certificates that verify the server (default: the system roots)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM file of the client certificate, for servers with tls-auth-clients (with --tls-key)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM file of the client certificate's private key (with --tls-cert)")
	fs.StringVar(&c.tlsServerName, "tls-server-name", "", "name the server certificates must carry (default: the host of each address dialed)")
	fs.BoolVar(&c.tlsInsecure, "tls-insecure", false, "do not verify the server certificate (self-signed test servers only: anyone on the path can impersonate the server)")
	fs.StringVar(&c.user, "user", "", "ACL user name (default: the URL's, else the default user)")
	fs.StringVar(&c.password, "password", "", "password (default: the URL's, else $"+envRedisPassword+"; prefer the environment, a flag is visible in ps)")
	fs.IntVar(&c.db, "db", 0, "database number (standalone servers only; a cluster has only 0)")
	fs.DurationVar(&c.timeout, "timeout", timeout, "deadline of the whole command; each Redis call is also bounded by "+maxCallTimeout.String())
	return c
}

// set reports whether flag name was given on the command line.
func (c *connFlags) set(name string) bool {
	found := false
	c.fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			found = true
		}
	})
	return found
}

// redisURL is a parsed redis:// or rediss:// URL.
type redisURL struct {
	tls            bool
	addrs          []string
	user, password string
	hasUser        bool
	hasPassword    bool
	db             int
	hasDB          bool
}

// parseRedisURL parses redis://[user[:password]@]host[:port][/db][?addr=host:port&db=N]
// (rediss:// for TLS). Any other scheme, path, query parameter or malformed part is an
// error naming it.
func parseRedisURL(s string) (redisURL, error) {
	var r redisURL
	u, err := url.Parse(s)
	if err != nil {
		return r, fmt.Errorf("--url: %w", err)
	}
	switch u.Scheme {
	case "redis":
	case "rediss":
		r.tls = true
	default:
		return r, fmt.Errorf("--url %q: scheme %q, want redis:// or rediss://", redact(u), u.Scheme)
	}
	if u.Opaque != "" {
		return r, fmt.Errorf("--url %q: want redis://host:port, not redis:host", redact(u))
	}
	if u.Fragment != "" {
		return r, fmt.Errorf("--url %q: unexpected #fragment", redact(u))
	}
	if u.User != nil {
		r.user, r.hasUser = u.User.Username(), u.User.Username() != ""
		r.password, r.hasPassword = u.User.Password()
	}
	if u.Host == "" {
		return r, fmt.Errorf("--url %q: no host", redact(u))
	}
	addr, _, err := normalizeAddr(u.Host)
	if err != nil {
		return r, fmt.Errorf("--url %q: %w", redact(u), err)
	}
	r.addrs = []string{addr}
	switch p := u.Path; {
	case p == "" || p == "/":
	case strings.Count(p, "/") == 1:
		if r.db, err = parseDB(p[1:]); err != nil {
			return r, fmt.Errorf("--url %q: path: %w", redact(u), err)
		}
		r.hasDB = true
	default:
		return r, fmt.Errorf("--url %q: path %q, want /DB (a database number)", redact(u), p)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return r, fmt.Errorf("--url %q: query: %w", redact(u), err)
	}
	for k, vs := range q {
		switch k {
		case "addr":
			for _, v := range vs {
				a, _, err := normalizeAddr(v)
				if err != nil {
					return r, fmt.Errorf("--url %q: addr: %w", redact(u), err)
				}
				r.addrs = append(r.addrs, a)
			}
		case "db":
			if len(vs) != 1 {
				return r, fmt.Errorf("--url %q: db given %d times", redact(u), len(vs))
			}
			db, err := parseDB(vs[0])
			if err != nil {
				return r, fmt.Errorf("--url %q: db: %w", redact(u), err)
			}
			if r.hasDB && db != r.db {
				return r, fmt.Errorf("--url %q: database %d in the path and %d in the query", redact(u), r.db, db)
			}
			r.db, r.hasDB = db, true
		default:
			return r, fmt.Errorf("--url %q: unknown query parameter %q (known: addr, db)", redact(u), k)
		}
	}
	return r, nil
}

// redact returns u without its password, for error messages.
func redact(u *url.URL) string { return u.Redacted() }

// parseDB parses a database number.
func parseDB(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 1<<20 {
		return 0, fmt.Errorf("database %q, want a number from 0", s)
	}
	return n, nil
}

// normalizeAddr checks a host:port (the port defaults to 6379) and returns it with its host.
func normalizeAddr(s string) (addr, host string, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", "", errors.New("empty address")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			host, port, err = s, "6379", nil
			if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
				host = host[1 : len(host)-1]
			}
		} else {
			return "", "", fmt.Errorf("address %q: %v", s, err)
		}
	}
	if host == "" {
		return "", "", fmt.Errorf("address %q: no host", s)
	}
	if strings.ContainsAny(host, " /\\@?#[]\x00") {
		return "", "", fmt.Errorf("address %q: bad host %q", s, host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return "", "", fmt.Errorf("address %q: port %q, want 1-65535", s, port)
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), host, nil
}

// target is the resolved connection of a subcommand.
type target struct {
	addrs    []string // empty: the subcommand's own fallback (conformance: miniredis)
	opt      rueidis.ClientOption
	cluster  bool
	describe string // for messages, never with the password
}

// resolve turns the flags (after fs.Parse) into a client option, without connecting. It
// reads files only for --tls-ca/--tls-cert/--tls-key.
func (c *connFlags) resolve() (target, error) {
	var t target
	if c.timeout <= 0 {
		return t, fmt.Errorf("--timeout %v, want a positive duration", c.timeout)
	}
	if c.db < 0 {
		return t, fmt.Errorf("--db %d, want 0 or more", c.db)
	}
	rawURL := c.url
	if rawURL == "" && c.readEnvURL && !c.set("redis") {
		rawURL = c.getenv(envRedisURL)
	}
	var u redisURL
	if rawURL != "" {
		if c.set("redis") && c.set("url") {
			return t, errors.New("give --redis or --url, not both")
		}
		var err error
		if u, err = parseRedisURL(rawURL); err != nil {
			if c.url == "" {
				err = fmt.Errorf("$%s: %w", envRedisURL, err)
			}
			return t, err
		}
	}
	addrs := u.addrs
	if len(addrs) == 0 && c.addr != "" {
		for _, a := range strings.Split(c.addr, ",") {
			addr, _, err := normalizeAddr(a)
			if err != nil {
				return t, fmt.Errorf("--redis: %w", err)
			}
			addrs = append(addrs, addr)
		}
	}
	opt := rueidis.ClientOption{InitAddress: addrs, DisableCache: true, ConnWriteTimeout: min(c.timeout, maxCallTimeout)}
	opt.Dialer.Timeout = min(c.timeout, 5*time.Second)
	opt.Username = u.user
	if c.set("user") {
		opt.Username = c.user
	}
	switch {
	case c.set("password"):
		opt.Password = c.password
	case u.hasPassword:
		opt.Password = u.password
	default:
		opt.Password = c.getenv(envRedisPassword)
	}
	opt.SelectDB = u.db
	if c.set("db") {
		opt.SelectDB = c.db
	}
	if c.cluster && opt.SelectDB != 0 {
		return t, fmt.Errorf("--db %d with --cluster: a Redis Cluster has only database 0", opt.SelectDB)
	}
	useTLS := u.tls || c.tls || c.tlsCA != "" || c.tlsCert != "" || c.tlsKey != "" || c.tlsInsecure || c.tlsServerName != ""
	if useTLS {
		if len(addrs) == 0 {
			return t, errors.New("--tls needs --redis or --url")
		}
		// An empty ServerName makes the TLS dialer verify each node against the host it
		// dials, which a cluster's nodes need; --tls-server-name fixes one name for all.
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.tlsServerName, InsecureSkipVerify: c.tlsInsecure}
		if c.tlsCA != "" {
			pem, err := os.ReadFile(c.tlsCA)
			if err != nil {
				return t, fmt.Errorf("--tls-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return t, fmt.Errorf("--tls-ca %s: no PEM certificate in the file", c.tlsCA)
			}
			cfg.RootCAs = pool
		}
		if (c.tlsCert == "") != (c.tlsKey == "") {
			return t, errors.New("--tls-cert and --tls-key go together")
		}
		if c.tlsCert != "" {
			pair, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
			if err != nil {
				return t, fmt.Errorf("--tls-cert/--tls-key: %w", err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		opt.TLSConfig = cfg
	}
	if len(addrs) == 0 && (opt.Username != "" || c.set("password") || c.set("db")) {
		return t, errors.New("--user, --password and --db need --redis or --url")
	}
	t.addrs, t.opt, t.cluster = addrs, opt, c.cluster
	scheme := "redis"
	if useTLS {
		scheme = "rediss"
	}
	t.describe = scheme + "://" + strings.Join(addrs, ",")
	if opt.SelectDB != 0 {
		t.describe += "/" + strconv.Itoa(opt.SelectDB)
	}
	return t, nil
}

// client connects as the flags say. With --cluster it also checks that the server is a
// healthy Redis Cluster. ctx bounds the check; the dial is bounded by min(--timeout, 5s).
func (c *connFlags) client(ctx context.Context) (rueidis.Client, target, error) {
	t, err := c.resolve()
	if err != nil {
		return nil, t, err
	}
	if len(t.addrs) == 0 {
		return nil, t, errors.New("no Redis address: give --redis host:port or --url")
	}
	return t.connect(ctx)
}

// connect opens the client of t.
func (t target) connect(ctx context.Context) (rueidis.Client, target, error) {
	cl, err := rueidis.NewClient(t.opt)
	if err != nil {
		return nil, t, fmt.Errorf("connect to %s: %w", t.describe, err)
	}
	if t.cluster {
		cctx, cancel := callContext(ctx)
		defer cancel()
		info, err := cl.Do(cctx, cl.B().ClusterInfo().Build()).ToString()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			cl.Close()
			return nil, t, fmt.Errorf("--cluster: %s is not a healthy Redis Cluster (CLUSTER INFO: %v)", t.describe, firstNonNil(err, strings.TrimSpace(info)))
		}
		t.describe = fmt.Sprintf("the cluster at %s (%d nodes)", t.describe, len(cl.Nodes()))
	}
	return cl, t, nil
}

// callContext bounds one Redis call by maxCallTimeout (and by ctx, the command's deadline).
func callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, maxCallTimeout)
}

// usageFunc returns a flag.FlagSet Usage printing text, then every flag with its default.
func usageFunc(fs *flag.FlagSet, text string) func() {
	return func() {
		fmt.Fprint(fs.Output(), text)
		fs.PrintDefaults()
	}
}
