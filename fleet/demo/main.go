// Command demo runs eight replica processes against one HTTP dependency
// through an outage, twice: with plain breakers, then as a fleet on Redis
// with redis-server killed and restarted in the middle of the outage. It
// prints each replica's time to open and the probes per open period. make
// demo-fleet runs it; redis-server must be on PATH (make installs it).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/fleet"
)

// The scenario, in time since a run's start.
const (
	replicas     = 8
	outageStart  = 1 * time.Second
	outageEnd    = 7 * time.Second
	runFor       = 8 * time.Second
	openDuration = time.Second
	redisDown    = 3 * time.Second // into the run: redis-server killed (fleet run)
	redisUp      = 4 * time.Second // and started again, empty
)

func main() {
	replica := flag.String("replica", "", "run as a replica of this name (internal)")
	dep := flag.String("dep", "", "the dependency's URL (replica)")
	addr := flag.String("redis", "", "redis address; empty: plain breakers (replica)")
	start := flag.Int64("start", 0, "the run's start, Unix ms (replica)")
	every := flag.Duration("every", 0, "the interval between calls (replica)")
	flag.Parse()
	if *replica != "" {
		os.Exit(runReplica(*replica, *dep, *addr, time.UnixMilli(*start), *every))
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// dependency is the HTTP dependency: down between outageStart and
// outageEnd of the current run.
type dependency struct {
	start atomic.Int64 // the run's start, Unix ms
}

func (d *dependency) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	since := time.Since(time.UnixMilli(d.start.Load()))
	if since >= outageStart && since < outageEnd {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func run() error {
	redisPath, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server is not on PATH (%v): run `make redis` (scripts/redis.sh) first", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	dep := &dependency{}
	srv := &http.Server{Handler: dep}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	url := "http://" + l.Addr().String()

	fmt.Printf("%d replicas, one dependency down from %v to %v of each %v run; breakers trip on 3 failures in a row, open for %v\n\n",
		replicas, outageStart, outageEnd, runFor, openDuration)
	plain, err := scenario(dep, url, "", nil)
	if err != nil {
		return err
	}
	report("without the fleet (each replica its own breaker)", plain)

	addr, err := freeAddr()
	if err != nil {
		return err
	}
	rs, err := startRedis(redisPath, addr)
	if err != nil {
		return err
	}
	defer func() { rs.Process.Kill(); rs.Wait() }()
	restart := func() {
		time.Sleep(redisDown)
		rs.Process.Kill()
		rs.Wait()
		fmt.Printf("  [%v] redis-server killed\n", redisDown)
		time.Sleep(redisUp - redisDown)
		if rs, err = startRedis(redisPath, addr); err != nil {
			fmt.Fprintln(os.Stderr, "demo: restarting redis-server:", err)
			return
		}
		fmt.Printf("  [%v] redis-server started again, empty\n", redisUp)
	}
	fmt.Println("with the fleet (quorum 2, one probe per half-open period), redis-server killed and restarted mid-outage:")
	withFleet, err := scenario(dep, url, addr, restart)
	if err != nil {
		return err
	}
	report("", withFleet)
	return nil
}

// event is one line a replica printed.
type event struct {
	replica string
	kind    string // "open" or "probe"
	at      time.Duration
}

// scenario runs the replicas for one run and returns their events.
func scenario(dep *dependency, url, addr string, during func()) ([]event, error) {
	start := time.Now().Add(500 * time.Millisecond) // the replicas' start-up
	dep.start.Store(start.UnixMilli())
	var (
		mu     sync.Mutex
		events []event
		wg     sync.WaitGroup
	)
	for i := range replicas {
		name := "r" + strconv.Itoa(i)
		every := time.Duration(10+15*i) * time.Millisecond
		cmd := exec.Command(os.Args[0], "-replica", name, "-dep", url, "-redis", addr,
			"-start", strconv.FormatInt(start.UnixMilli(), 10), "-every", every.String())
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) != 2 {
					continue
				}
				ms, _ := strconv.ParseInt(f[1], 10, 64)
				mu.Lock()
				events = append(events, event{replica: name, kind: f[0], at: time.Duration(ms) * time.Millisecond})
				mu.Unlock()
			}
			_ = cmd.Wait()
		}()
	}
	if during != nil {
		time.Sleep(time.Until(start))
		during()
	}
	wg.Wait()
	return events, nil
}

// report prints each replica's time to open and the probes per open
// period (windows of the open duration from the outage's start).
func report(title string, events []event) {
	if title != "" {
		fmt.Println(title + ":")
	}
	fmt.Println("  replica  calls every  time to open after the outage began")
	for i := range replicas {
		name := "r" + strconv.Itoa(i)
		open := "never"
		for _, e := range events {
			if e.replica == name && e.kind == "open" && e.at >= outageStart {
				open = (e.at - outageStart).Round(time.Millisecond).String()
				break
			}
		}
		fmt.Printf("  %-7s  %-11v  %s\n", name, time.Duration(10+15*i)*time.Millisecond, open)
	}
	var windows []string
	most := 0
	for w := outageStart; w < outageEnd+openDuration; w += openDuration {
		n := 0
		for _, e := range events {
			if e.kind == "probe" && e.at >= w && e.at < w+openDuration {
				n++
			}
		}
		most = max(most, n)
		windows = append(windows, fmt.Sprintf("%v-%v: %d", w, w+openDuration, n))
	}
	fmt.Printf("  probes per open duration, by time into the run: %s (at most %d in one)\n\n",
		strings.Join(windows, ", "), most)
}

// runReplica is one replica: it calls the dependency every interval
// through its breaker (a fleet member when addr is set) until the run
// ends, printing "open MS" for each move to open and "probe MS" for each
// probe it sends, MS the time since the run's start.
func runReplica(name, url, addr string, start time.Time, every time.Duration) int {
	ms := func() int64 { return time.Since(start).Milliseconds() }
	var out sync.Mutex
	say := func(kind string) {
		out.Lock()
		defer out.Unlock()
		fmt.Println(kind, ms())
	}
	cfg := core.Config{
		Name:                name,
		ConsecutiveFailures: 3,
		OpenDuration:        openDuration,
		OnStateChange: func(t core.Transition) {
			if t.To == core.Open {
				say("open")
			}
		},
	}
	var g core.Guard
	if addr == "" {
		b, err := core.New(cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		g = b
	} else {
		redis.SetLogger(quiet{})
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
		defer c.Close()
		m, err := fleet.New(cfg, fleet.Options{Client: c, Key: "demo", Member: name, Quorum: 2, Probes: 1})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer m.Close()
		g = m
	}
	time.Sleep(time.Until(start))
	client := &http.Client{Timeout: time.Second}
	for time.Since(start) < runFor {
		if p, err := g.Allow(); err == nil {
			if p.Probe {
				say("probe")
			}
			resp, err := client.Get(url)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			g.Done(p, err)
		}
		time.Sleep(every)
	}
	return 0
}

// quiet drops go-redis's log lines (the redis-server restart makes many).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startRedis starts redis-server on addr, without persistence, and waits
// until it answers.
func startRedis(path, addr string) (*exec.Cmd, error) {
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(path, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return cmd, nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil, fmt.Errorf("redis-server on %s did not answer within 5 s", addr)
}
