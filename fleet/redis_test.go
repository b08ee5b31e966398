package fleet

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server the test started on a free loopback port,
// without persistence, so that a restart starts empty. The test's cleanup
// kills it.
type redisServer struct {
	t    testing.TB
	path string
	addr string
	mu   sync.Mutex
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	// clusterDir, for a Redis Cluster node, is the folder of its cluster
	// configuration file; empty for a standalone server.
	clusterDir string
	// busPort is a cluster node's cluster bus port, chosen free at start.
	busPort string
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startRedis starts a redis-server on a free port of 127.0.0.1. Without
// redis-server on PATH the test fails, never skips: make test installs it
// (scripts/redis.sh), so a missing one is a broken setup, not an optional
// check.
func startRedis(t testing.TB) *redisServer {
	t.Helper()
	return startRedisNode(t, "")
}

// startRedisNode is startRedis, as a Redis Cluster node (with no slots
// and no peers yet) keeping its cluster configuration in clusterDir
// where clusterDir is not empty.
func startRedisNode(t testing.TB, clusterDir string) *redisServer {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is not on PATH (%v): run `bash scripts/redis.sh` from the repository's root, "+
			"which installs Debian's redis-server package (make test runs it), or put redis-server on PATH", err)
	}
	r := &redisServer{t: t, path: path, clusterDir: clusterDir}
	// A free port can be taken between our listen and the server's: a
	// few tries with new ports.
	for try := 0; ; try++ {
		if r.addr, err = freeAddr(); err != nil {
			t.Fatal(err)
		}
		if err = r.start(); err == nil {
			break
		} else if try == 4 {
			t.Fatal(err)
		}
	}
	t.Cleanup(r.kill)
	return r
}

// start starts the server on r.addr and waits until it answers PING.
func (r *redisServer) start() error {
	_, port, _ := net.SplitHostPort(r.addr)
	args := []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--protected-mode", "no", "--loglevel", "warning"}
	if r.clusterDir != "" {
		// The bus port's default, port + 10000, can be above 65535 or
		// taken: a free one of its own.
		bus, err := freeAddr()
		if err != nil {
			return err
		}
		_, r.busPort, _ = net.SplitHostPort(bus)
		args = append(args, "--cluster-enabled", "yes", "--cluster-port", r.busPort,
			"--cluster-config-file", filepath.Join(r.clusterDir, "nodes-"+port+".conf"))
	}
	cmd := exec.Command(r.path, args...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	r.mu.Lock()
	r.cmd, r.out, r.done = cmd, out, done
	r.mu.Unlock()
	c := redis.NewClient(&redis.Options{Addr: r.addr, MaxRetries: -1})
	defer c.Close()
	for i := 0; i < 500; i++ {
		select {
		case <-done:
			return fmt.Errorf("redis-server on %s exited: %s", r.addr, out.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond) // polling a process' start, not moving a breaker's time
	}
	r.kill()
	return fmt.Errorf("redis-server on %s did not answer PING within 5 s: %s", r.addr, out.String())
}

// freeAddr returns a loopback address with a port free when it returns.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// signal sends sig to the server.
func (r *redisServer) signal(sig syscall.Signal) {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("signal %v to redis-server: %v", sig, err)
	}
}

// kill kills the server with SIGKILL and waits until it is gone.
func (r *redisServer) kill() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies on SIGKILL too, but its port goes sooner
	_ = cmd.Process.Kill()
	<-done
}

// restart starts the server again on the same port, empty.
func (r *redisServer) restart() {
	r.t.Helper()
	var err error
	for try := 0; try < 20; try++ {
		if err = r.start(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond) // the port held by the dead server's sockets
	}
	r.t.Fatal(err)
}

// client returns a new client of the server, closed at the test's end,
// with the context deadlines a member needs.
func (r *redisServer) client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                  r.addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialTimeout:           time.Second,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// connect is client, as the store interface wants it.
func (r *redisServer) connect(t testing.TB) redis.UniversalClient { return r.client(t) }

// subscriptions is what the store interface says, for one server.
func (r *redisServer) subscriptions(t testing.TB) func(channel string) int64 {
	c := r.client(t)
	return func(channel string) int64 {
		n, _ := c.PubSubNumSub(context.Background(), channel).Result()
		return n[channel]
	}
}

// redisZ is a sorted-set member with its score.
func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }
