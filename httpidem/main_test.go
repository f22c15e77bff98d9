package httpidem_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/redstream-go/redstream/internal/redistest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" { // the process TestKilledMidRequest starts and kills
		os.Exit(m.Run())
	}
	code := redistest.Main(m)
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("internal/poll.runtime_pollWait")); err != nil {
			os.Stderr.WriteString("goroutine leak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
