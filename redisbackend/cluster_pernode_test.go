package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redstream-go/redstream"
	"github.com/redstream-go/redstream/internal/redistest"
)

// TestClusterMasterKilledPerNode: 16 goroutines decide keys spread over the three masters
// of a real cluster (one replica each) while one master is SIGKILLed and its replica
// promoted. The limiter's breakers are per master: no decision for a key of a healthy
// master fails, while the dead master's keys fail (connection refused, then ErrCircuitOpen
// at once from its open breaker: the failure policy answers them) until the replica has
// taken over, and work again within the cool-down and a topology lookup after that. The
// dead master's breaker opens (one Warn naming its node) and closes at last (one Info), when
// a probe reaches the promoted replica or the lookup finds its slots there; until rueidis
// has refreshed its own view a few calls may still go to the dead node and open it again.
//
// The limiter's Timeout is 1 s rather than 100 ms: on a loaded 2-core machine a healthy
// master's call can wait over 100 ms with no fault at all, and the test counts the fault's
// failures. The dead master's calls fail at once (connection refused) whatever the Timeout.
func TestClusterMasterKilledPerNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 6-node cluster")
	}
	nodes, addrs := failoverCluster(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, Dialer: net.Dialer{Timeout: 300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	var logs logBuffer
	var mu sync.Mutex
	var changes []redstream.BreakerChange
	eng := mustLimiter(t, client, redstream.TokenBucket(1e6, 1e6), Options{Timeout: time.Second, KeyPrefix: uniq("cl-pernode"),
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Breaker: redstream.BreakerOptions{OnStateChange: func(c redstream.BreakerChange) {
			mu.Lock()
			changes = append(changes, c)
			mu.Unlock()
		}}})

	downAddr := masterOf(t, addrs[0], slotOf(eng.Keys("k0")[0]))
	var up, down []string
	for i := 0; len(up) < 200 || len(down) < 100; i++ {
		k := fmt.Sprint("k", i)
		if masterOf(t, addrs[0], slotOf(eng.Keys(k)[0])) == downAddr {
			down = append(down, k)
		} else {
			up = append(up, k)
		}
	}
	for _, k := range append(append([]string(nil), up...), down...) {
		if _, err := eng.AllowN(ctx, k, time.Time{}, 1); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the breakers' first CLUSTER SLOTS
	if _, err := eng.AllowN(ctx, up[0], time.Time{}, 1); err != nil {
		t.Fatal(err)
	}

	var victim *redistest.Server
	for _, n := range nodes {
		if n.Addr == downAddr {
			victim = n
		}
	}
	victim.Stop() // SIGKILL
	killed := time.Now()
	t.Cleanup(func() { _ = victim.Restart() })

	var upCalls, upFails, downCalls, downFails, downOpen atomic.Int64
	var firstUp atomic.Pointer[error]
	var promoted atomic.Bool
	var backAt atomic.Int64 // ns after the kill of the last failed call on the dead master's keys
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				time.Sleep(time.Millisecond)
				if i%3 == 0 {
					_, err := eng.AllowN(ctx, down[i%len(down)], time.Time{}, 1)
					downCalls.Add(1)
					if err != nil {
						downFails.Add(1)
						backAt.Store(int64(time.Since(killed)))
						if errors.Is(err, redstream.ErrCircuitOpen) {
							downOpen.Add(1)
						}
					}
					continue
				}
				_, err := eng.AllowN(ctx, up[i%len(up)], time.Time{}, 1)
				upCalls.Add(1)
				if err != nil {
					upFails.Add(1)
					firstUp.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	var promotedAfter time.Duration
	var promotedAddr string
	for promotedAfter == 0 {
		if a := liveMasterOf(ctx, addrs, downAddr, slotOf(eng.Keys(down[0])[0])); a != "" {
			promotedAfter = time.Since(killed)
			promotedAddr = a
			promoted.Store(true)
		} else if time.Since(killed) > 30*time.Second {
			close(stop)
			wg.Wait()
			t.Fatal("no replica promoted 30 s after the kill")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(DefaultCoolDownForTest + 3*time.Second) // a cool-down, a lookup, rueidis's refresh
	close(stop)
	wg.Wait()
	last := time.Duration(backAt.Load())
	t.Logf("master %s killed, replica promoted %v later; healthy masters: %d of %d decisions failed; dead master: %d of %d failed (%d ErrCircuitOpen), the last %v after the kill",
		downAddr, promotedAfter.Round(time.Millisecond), upFails.Load(), upCalls.Load(), downFails.Load(), downCalls.Load(), downOpen.Load(), last.Round(time.Millisecond))
	if n := upFails.Load(); n != 0 {
		t.Errorf("%d decisions failed for keys of the healthy masters (the first: %v), want 0", n, *firstUp.Load())
	}
	if downFails.Load() == 0 || downOpen.Load() == 0 {
		t.Errorf("the dead master's keys: %d failures, %d ErrCircuitOpen; want both", downFails.Load(), downOpen.Load())
	}
	if last > promotedAfter+DefaultCoolDownForTest+2*time.Second {
		t.Errorf("the dead master's keys failed until %v after the kill, the replica was promoted after %v", last, promotedAfter)
	}
	mu.Lock()
	defer mu.Unlock()
	// The dead master's breaker opens; the promoted replica's may open too, for the dead
	// master's keys, while the client still routes them to the dead address after the
	// lookup has given their slots to the replica. No other master's breaker moves.
	var opened int
	lastTo := map[string]redstream.BreakerState{}
	for _, c := range changes {
		if c.Node != downAddr && c.Node != promotedAddr {
			t.Errorf("breaker change %+v of a node other than the dead master and its promoted replica %s", c, promotedAddr)
		}
		lastTo[c.Node] = c.To
		if c.To == redstream.BreakerOpen && c.From == redstream.BreakerClosed {
			opened++
		}
	}
	closedAtLast := true
	for _, to := range lastTo {
		closedAtLast = closedAtLast && to == redstream.BreakerClosed
	}
	if opened == 0 || opened > 4 || !closedAtLast || eng.BreakerState() != redstream.BreakerClosed {
		t.Errorf("changes %+v, breaker %v; want the dead master's breaker opened (once, or again while the client still routes to it) and closed at last",
			changes, eng.BreakerState())
	}
	t.Logf("logs: %q", logs.lines())
}
