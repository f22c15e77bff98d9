package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redstream-go/redstream/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// parseConn parses args with the connection flags of dlq/streams and an environment.
func parseConn(t testing.TB, env map[string]string, args ...string) (target, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := addConnFlags(fs, "127.0.0.1:6379", true, 30*time.Second)
	c.getenv = func(k string) string { return env[k] }
	if err := fs.Parse(args); err != nil {
		return target{}, err
	}
	return c.resolve()
}

func TestConnFlagsResolve(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   map[string]string
		args  []string
		addrs []string
		user  string
		pass  string
		db    int
		tls   bool
		sni   string
	}{
		{name: "default", addrs: []string{"127.0.0.1:6379"}},
		{name: "redis flag", args: []string{"--redis", "10.0.0.1:7000,10.0.0.2"}, addrs: []string{"10.0.0.1:7000", "10.0.0.2:6379"}},
		{name: "url", args: []string{"--url", "redis://ops:s3cret@cache.internal:6380/2"}, addrs: []string{"cache.internal:6380"}, user: "ops", pass: "s3cret", db: 2},
		{name: "url seeds and query db", args: []string{"--url", "redis://a:1?addr=b:2&addr=c&db=4"}, addrs: []string{"a:1", "b:2", "c:6379"}, db: 4},
		{name: "rediss", args: []string{"--url", "rediss://redis.example:6390"}, addrs: []string{"redis.example:6390"}, tls: true},
		{name: "ipv6", args: []string{"--redis", "[::1]:7001"}, addrs: []string{"[::1]:7001"}},
		{name: "env url", env: map[string]string{envRedisURL: "redis://:pw@h:1/3"}, addrs: []string{"h:1"}, pass: "pw", db: 3},
		{name: "redis flag beats env url", env: map[string]string{envRedisURL: "redis://h:1/3"}, args: []string{"--redis", "x:2"}, addrs: []string{"x:2"}},
		{name: "env password", env: map[string]string{envRedisPassword: "fromenv"}, args: []string{"--user", "u"}, addrs: []string{"127.0.0.1:6379"}, user: "u", pass: "fromenv"},
		{name: "flags beat the url", env: map[string]string{envRedisPassword: "fromenv"}, args: []string{"--url", "redis://a:b@h:1/1", "--user", "c", "--password", "flagpw", "--db", "5"}, addrs: []string{"h:1"}, user: "c", pass: "flagpw", db: 5},
		{name: "url password beats env", env: map[string]string{envRedisPassword: "fromenv"}, args: []string{"--url", "redis://:urlpw@h:1"}, addrs: []string{"h:1"}, pass: "urlpw"},
		{name: "tls flags", args: []string{"--redis", "10.1.2.3:6379", "--tls", "--tls-server-name", "redis.internal"}, addrs: []string{"10.1.2.3:6379"}, tls: true, sni: "redis.internal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg, err := parseConn(t, tc.env, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			o := tg.opt
			if strings.Join(o.InitAddress, " ") != strings.Join(tc.addrs, " ") || o.Username != tc.user || o.Password != tc.pass || o.SelectDB != tc.db || (o.TLSConfig != nil) != tc.tls {
				t.Errorf("got addrs %v user %q pass %q db %d tls %v", o.InitAddress, o.Username, o.Password, o.SelectDB, o.TLSConfig != nil)
			}
			// An empty server name: the TLS dialer checks each node against the host it dials.
			if tc.tls && o.TLSConfig.ServerName != tc.sni {
				t.Errorf("server name %q, want %q", o.TLSConfig.ServerName, tc.sni)
			}
			if tc.pass != "" && strings.Contains(tg.describe, tc.pass) {
				t.Errorf("description %q shows the password", tg.describe)
			}
			if o.Dialer.Timeout <= 0 || o.ConnWriteTimeout <= 0 {
				t.Errorf("no dial or write timeout: %v %v", o.Dialer.Timeout, o.ConnWriteTimeout)
			}
		})
	}
}

func TestConnFlagsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: []string{"--url", "http://h:1"}, want: `scheme "http"`},
		{args: []string{"--url", "redis://h:1/x"}, want: `database "x"`},
		{args: []string{"--url", "redis://h:1/1/2"}, want: "path"},
		{args: []string{"--url", "redis://h:1?timeout=3"}, want: `unknown query parameter "timeout"`},
		{args: []string{"--url", "redis://h:1/1?db=2"}, want: "database 1 in the path and 2"},
		{args: []string{"--url", "redis://h:99999"}, want: "port"},
		{args: []string{"--url", "redis://:pw@"}, want: "no host"},
		{args: []string{"--url", "redis://u:topsecret@h:0"}, want: "port"},
		{args: []string{"--url", "redis://h", "--redis", "x:1"}, want: "not both"},
		{env: map[string]string{envRedisURL: "redis://h:1/-1"}, want: "$REDIS_URL"},
		{args: []string{"--redis", "h:1,"}, want: "empty address"},
		{args: []string{"--redis", "h:abc"}, want: "port"},
		{args: []string{"--db", "-1"}, want: "--db -1"},
		{args: []string{"--db", "1", "--cluster"}, want: "only database 0"},
		{args: []string{"--timeout", "0s"}, want: "--timeout"},
		{args: []string{"--tls-ca", "/nonexistent/ca.pem"}, want: "--tls-ca"},
		{args: []string{"--tls-cert", "c.pem"}, want: "go together"},
	} {
		_, err := parseConn(t, tc.env, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: err = %v, want one containing %q", tc.args, tc.env, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "topsecret") {
			t.Errorf("%v: the error shows the password: %v", tc.args, err)
		}
	}
}

// FuzzConnFlags: no URL, address or flag combination makes resolve panic, and what it
// accepts is well formed: valid host:port addresses, a non-negative db, and a description
// that never includes the password.
func FuzzConnFlags(f *testing.F) {
	f.Add("redis://u:p@h:1/2?addr=x:3", "", "", int64(0))
	f.Add("rediss://[::1]:6380", "", "", int64(0))
	f.Add("", "a:1,b", "--tls", int64(-1))
	f.Add("redis://%zz", "", "", int64(3))
	f.Add("redis://h:1?db=1&db=2", "h", "--cluster", int64(0))
	f.Add("redis:opaque", "[::1", "", int64(1<<40))
	f.Add("", "", "--user ops --password pw --timeout 1ms --tls-server-name x --db 2", int64(0))
	f.Add("", "", "--timeout -1s --url= --redis", int64(0))
	f.Fuzz(func(t *testing.T, rawURL, addr, extra string, db int64) {
		var args []string
		if rawURL != "" {
			args = append(args, "--url", rawURL)
		}
		if addr != "" {
			args = append(args, "--redis", addr)
		}
		for _, a := range strings.Fields(extra) {
			// Any flag and value, except the ones naming files to read.
			if strings.HasPrefix(strings.TrimLeft(a, "-"), "tls-c") || strings.HasPrefix(strings.TrimLeft(a, "-"), "tls-k") {
				return
			}
			args = append(args, a)
		}
		if db != 0 {
			args = append(args, "--db", strconv.FormatInt(db, 10))
		}
		tg, err := parseConn(t, map[string]string{envRedisPassword: "envpw-secret"}, args...)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if tg.opt.SelectDB < 0 {
			t.Fatalf("db %d accepted", tg.opt.SelectDB)
		}
		if len(tg.addrs) == 0 {
			t.Fatal("no address accepted")
		}
		for _, a := range tg.addrs {
			h, p, err := net.SplitHostPort(a)
			n, perr := strconv.Atoi(p)
			if err != nil || h == "" || perr != nil || n < 1 || n > 65535 {
				t.Fatalf("address %q accepted from %v", a, args)
			}
		}
		if pw := tg.opt.Password; len(pw) >= 6 && strings.Contains(tg.describe, pw) && !strings.Contains(strings.Join(tg.addrs, ","), pw) {
			t.Fatalf("description %q shows the password %q", tg.describe, pw)
		}
	})
}

// runCmd runs the command line args and returns its output.
func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, &out)
	return out.String(), err
}

// freeTCPPort returns a port nothing listens on right now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// pki is a throwaway CA with a server and a client certificate, as PEM files.
type pki struct{ ca, serverCert, serverKey, clientCert, clientKey string }

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	keyPEM := func(name string, k *ecdsa.PrivateKey) string {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name, "PRIVATE KEY", der)
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redstream test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, DNSNames: []string{"redis.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	sDER, sKey := leaf(2, "redis.test", x509.ExtKeyUsageServerAuth)
	cDER, cKey := leaf(3, "ops", x509.ExtKeyUsageClientAuth)
	return pki{
		ca:         write("ca.pem", "CERTIFICATE", caDER),
		serverCert: write("server.pem", "CERTIFICATE", sDER), serverKey: keyPEM("server-key.pem", sKey),
		clientCert: write("client.pem", "CERTIFICATE", cDER), clientKey: keyPEM("client-key.pem", cKey),
	}
}

// TestTLS runs streams and dlq against a real redis-server serving TLS with a throwaway
// CA: verified by --tls-ca or rediss://, refused without the CA, with a wrong server name,
// or in plain text; and, with tls-auth-clients yes, refused without a client certificate.
func TestTLS(t *testing.T) {
	p := newPKI(t)
	port := freeTCPPort(t)
	srv := redistest.NewServer(t, "--tls-port", strconv.Itoa(port), "--tls-cert-file", p.serverCert, "--tls-key-file", p.serverKey,
		"--tls-ca-cert-file", p.ca, "--tls-auth-clients", "optional")
	plain := redistest.NewClient(t, srv.Addr)
	ctx := context.Background()
	if err := plain.Do(ctx, plain.B().Xadd().Key("tls-orders").Id("*").FieldValue().FieldValue("body", "{}").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	tlsAddr := "127.0.0.1:" + strconv.Itoa(port)

	ok := [][]string{
		{"--redis", tlsAddr, "--tls", "--tls-ca", p.ca},
		{"--redis", tlsAddr, "--tls-ca", p.ca}, // --tls-ca implies --tls
		{"--url", "rediss://" + tlsAddr, "--tls-ca", p.ca},
		{"--url", "rediss://" + tlsAddr, "--tls-ca", p.ca, "--tls-server-name", "redis.test"},
		{"--redis", tlsAddr, "--tls-insecure"},
		{"--redis", tlsAddr, "--tls-ca", p.ca, "--tls-cert", p.clientCert, "--tls-key", p.clientKey},
	}
	for _, args := range ok {
		out, err := runCmd(t, append([]string{"streams", "--json", "--timeout", "20s"}, args...)...)
		if err != nil {
			t.Errorf("streams %v: %v", args, err)
			continue
		}
		var doc streamsJSON
		if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Topics) != 1 || doc.Topics[0].Stream != "tls-orders" {
			t.Errorf("streams %v: %v\n%s", args, err, out)
		}
	}
	if out, err := runCmd(t, "dlq", "topics", "--redis", tlsAddr, "--tls-ca", p.ca); err != nil || !strings.Contains(out, "(none)") {
		t.Errorf("dlq topics over TLS: %v\n%s", err, out)
	}
	bad := []struct {
		args []string
		want string
	}{
		{[]string{"--redis", tlsAddr, "--tls"}, "certificate"}, // the system roots do not know the test CA
		{[]string{"--redis", tlsAddr, "--tls-ca", p.ca, "--tls-server-name", "other.test"}, "certificate"},
		{[]string{"--redis", tlsAddr, "--timeout", "3s"}, ""}, // plain text to a TLS port
	}
	for _, b := range bad {
		start := time.Now()
		_, err := runCmd(t, append([]string{"streams"}, b.args...)...)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("streams %v: err = %v, want one containing %q", b.args, err, b.want)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("streams %v took %v", b.args, d)
		}
	}

	// A server that requires client certificates.
	port2 := freeTCPPort(t)
	redistest.NewServer(t, "--tls-port", strconv.Itoa(port2), "--tls-cert-file", p.serverCert, "--tls-key-file", p.serverKey,
		"--tls-ca-cert-file", p.ca, "--tls-auth-clients", "yes")
	addr2 := "127.0.0.1:" + strconv.Itoa(port2)
	if _, err := runCmd(t, "streams", "--redis", addr2, "--tls-ca", p.ca, "--timeout", "5s"); err == nil {
		t.Error("a server requiring client certificates accepted a client without one")
	}
	if out, err := runCmd(t, "streams", "--redis", addr2, "--tls-ca", p.ca, "--tls-cert", p.clientCert, "--tls-key", p.clientKey); err != nil {
		t.Errorf("with a client certificate: %v\n%s", err, out)
	}
	if _, err := runCmd(t, "streams", "--redis", addr2, "--tls-ca", p.ca, "--tls-cert", p.clientKey, "--tls-key", p.clientCert); err == nil || !strings.Contains(err.Error(), "--tls-cert") {
		t.Errorf("swapped cert and key: err = %v", err)
	}
}

// TestACLUser: a real server with ACL users; --user/--password, $REDIS_PASSWORD and the
// URL's credentials log in, a wrong password is refused, and a read-only user's purge
// fails with Redis's NOPERM.
func TestACLUser(t *testing.T) {
	srv := redistest.NewServer(t)
	admin := redistest.NewClient(t, srv.Addr)
	ctx := context.Background()
	for _, cmd := range []rueidis.Completed{
		admin.B().AclSetuser().Username("ops").Rule("reset", "on", ">s3cret", "~*", "&*", "+@all").Build(),
		admin.B().AclSetuser().Username("reader").Rule("reset", "on", ">r3ad", "~*", "+@read", "+@connection", "+info", "+role").Build(),
		admin.B().Xadd().Key("acl-orders").Id("*").FieldValue().FieldValue("body", "{}").Build(),
		admin.B().Xadd().Key("{acl-orders}:dlq").Id("*").FieldValue().FieldValue("body", "{}").FieldValue("dl_error", "x").Build(),
	} {
		if err := admin.Do(ctx, cmd).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := runCmd(t, "streams", "--redis", srv.Addr, "--user", "ops", "--password", "s3cret"); err != nil || !strings.Contains(out, "acl-orders") {
		t.Errorf("--user/--password: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "streams", "--url", "redis://ops:s3cret@"+srv.Addr+"/0"); err != nil || !strings.Contains(out, "acl-orders") {
		t.Errorf("URL credentials: %v\n%s", err, out)
	}
	t.Setenv(envRedisPassword, "s3cret")
	if out, err := runCmd(t, "dlq", "list", "--redis", srv.Addr, "--user", "ops", "--topic", "acl-orders"); err != nil || !strings.Contains(out, "1 dead letters") {
		t.Errorf("$REDIS_PASSWORD: %v\n%s", err, out)
	}
	t.Setenv(envRedisURL, "redis://ops@"+srv.Addr)
	if out, err := runCmd(t, "dlq", "topics"); err != nil || !strings.Contains(out, "acl-orders") {
		t.Errorf("$REDIS_URL with $REDIS_PASSWORD: %v\n%s", err, out)
	}
	t.Setenv(envRedisURL, "")
	t.Setenv(envRedisPassword, "")
	if _, err := runCmd(t, "streams", "--redis", srv.Addr, "--user", "ops", "--password", "wrong"); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("wrong password: err = %v", err)
	}
	if out, err := runCmd(t, "dlq", "list", "--redis", srv.Addr, "--user", "reader", "--password", "r3ad", "--topic", "acl-orders"); err != nil {
		t.Errorf("reader lists: %v\n%s", err, out)
	}
	if _, err := runCmd(t, "dlq", "purge", "--yes", "--redis", srv.Addr, "--user", "reader", "--password", "r3ad", "--topic", "acl-orders"); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("reader purges: err = %v, want NOPERM", err)
	}
	if n := xlenOf(t, admin, "{acl-orders}:dlq"); n != 1 {
		t.Errorf("%d dead letters after the refused purge, want 1", n)
	}
	// The default user's password (AUTH password, no user name).
	if err := admin.Do(ctx, admin.B().AclSetuser().Username("default").Rule("resetpass", ">defpw").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd(t, "streams", "--redis", srv.Addr, "--timeout", "5s"); err == nil {
		t.Error("no password accepted by a server that requires one")
	}
	if out, err := runCmd(t, "streams", "--redis", srv.Addr, "--password", "defpw"); err != nil || !strings.Contains(out, "acl-orders") {
		t.Errorf("default user's password: %v\n%s", err, out)
	}
}

// TestDB: --db and the URL's /db select the database.
func TestDB(t *testing.T) {
	srv := redistest.NewServer(t)
	ctx := context.Background()
	db3, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, SelectDB: 3, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db3.Close()
	if err := db3.Do(ctx, db3.B().Xadd().Key("in-db3").Id("*").FieldValue().FieldValue("body", "{}").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--redis", srv.Addr, "--db", "3"}, {"--url", "redis://" + srv.Addr + "/3"}, {"--url", "redis://" + srv.Addr + "?db=3"}} {
		if out, err := runCmd(t, append([]string{"streams"}, args...)...); err != nil || !strings.Contains(out, "in-db3") {
			t.Errorf("streams %v: %v\n%s", args, err, out)
		}
	}
	if out, err := runCmd(t, "streams", "--redis", srv.Addr); err != nil || strings.Contains(out, "in-db3") {
		t.Errorf("db 0 shows db 3's stream: %v\n%s", err, out)
	}
}

// TestHungAndDeadServer: a server that accepts connections and never answers, and an
// address nobody listens on, fail within the deadline instead of hanging.
func TestHungAndDeadServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // read nothing, answer nothing
		}
	}()
	dead := "127.0.0.1:" + strconv.Itoa(freeTCPPort(t))
	for _, args := range [][]string{
		{"streams", "--redis", l.Addr().String(), "--timeout", "2s"},
		{"dlq", "topics", "--redis", l.Addr().String(), "--timeout", "2s"},
		{"dlq", "list", "--topic", "t", "--redis", l.Addr().String(), "--timeout", "2s"},
		{"streams", "--redis", dead, "--timeout", "2s"},
		{"conformance", "--redis", l.Addr().String(), "--timeout", "2s"},
	} {
		start := time.Now()
		_, err := runCmd(t, args...)
		d := time.Since(start)
		if err == nil {
			t.Errorf("%v: no error", args)
		}
		// 2s deadline; the margin is for a loaded machine.
		if d > 20*time.Second {
			t.Errorf("%v: returned after %v, want about 2s", args, d)
		}
		t.Logf("%v: %v after %v", args, err, d.Round(time.Millisecond))
	}
}
