package fleet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/casbreaker/casbreaker/core"
)

// childEnv, when set (to "address key name"), makes the test binary a
// fleet member process (child) instead of running tests.
const childEnv = "CASBREAKER_FLEET_CHILD"

// child is a member process: one member of the fleet named in spec, with
// a manual clock, driven by commands on stdin, one a line, each answered
// with one line on stdout: "trip" (trip the breaker, wait until the store
// recorded it: "tripped"), "wait-open" (wait until the fleet's open state
// is adopted: "open VERSION"), "probe" (advance the clock by the open
// duration and call once: "granted" or "refused"), "exit".
func child(spec string) int {
	var addr, key, name string
	if _, err := fmt.Sscan(spec, &addr, &key, &name); err != nil {
		fmt.Fprintln(os.Stderr, "child: bad spec:", spec, err)
		return 2
	}
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer c.Close()
	clock := core.NewManualClock(time.Hour)
	m, err := New(testConfig(clock), Options{Client: c, Key: key, Member: name, Quorum: 3, Probes: 1, StoreTimeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer m.Close()
	wait := func(cond func() bool) bool {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			if cond() {
				return true
			}
		}
		return false
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "trip":
			for range 3 {
				if p, err := m.Allow(); err == nil {
					m.Done(p, errDown)
				}
			}
			if !wait(func() bool { return m.Stats().Published >= 1 }) {
				fmt.Println("trip not recorded")
				continue
			}
			fmt.Println("tripped")
		case "wait-open":
			if !wait(func() bool { return m.Stats().FleetOpen }) {
				fmt.Println("not open")
				continue
			}
			fmt.Println("open", m.Stats().Version)
		case "probe":
			clock.Advance(openDuration)
			if _, err := m.Allow(); err == nil {
				fmt.Println("granted") // never reported: the lease stays held
			} else {
				fmt.Println("refused")
			}
		case "exit":
			return 0
		}
	}
	return 0
}

// memberProcess is a child process and its command line.
type memberProcess struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

func (p *memberProcess) do(t *testing.T, cmd string) string {
	t.Helper()
	if _, err := fmt.Fprintln(p.in, cmd); err != nil {
		t.Fatal(err)
	}
	if !p.out.Scan() {
		t.Fatalf("a member process ended without answering %q: %v", cmd, p.out.Err())
	}
	return p.out.Text()
}

// TestThreeProcesses: three member processes (the test binary run again)
// of one fleet with a quorum of three: two trips open nothing, the third
// opens all three at one version, and the half-open period that follows
// grants one probe across the three processes.
func TestThreeProcesses(t *testing.T) {
	srv := startRedis(t)
	key := "three-processes"
	var procs []*memberProcess
	for i := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s p%d", childEnv, srv.addr, key, i))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			in.Close()
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		procs = append(procs, &memberProcess{in: in, out: bufio.NewScanner(out)})
	}
	c := srv.client(t)
	channel := "casbreaker:" + key
	eventually(t, "three member processes subscribed", func() bool {
		n, err := c.PubSubNumSub(context.Background(), channel).Result()
		return err == nil && n[channel] == 3
	})
	for i, p := range procs[:2] {
		if got := p.do(t, "trip"); got != "tripped" {
			t.Fatalf("process %d: %q", i, got)
		}
	}
	if v, err := c.HGet(context.Background(), "{casbreaker:"+key+"}:state", "v").Result(); err != nil || v != "0" {
		t.Fatalf("two trips of three moved the fleet to version %q (%v), want 0", v, err)
	}
	if got := procs[2].do(t, "trip"); got != "tripped" {
		t.Fatalf("process 2: %q", got)
	}
	for i, p := range procs {
		if got := p.do(t, "wait-open"); got != "open 1" {
			t.Fatalf("process %d: %q, want open 1", i, got)
		}
	}
	var answers []string
	for _, p := range procs {
		answers = append(answers, p.do(t, "probe"))
	}
	if strings.Count(strings.Join(answers, " "), "granted") != 1 {
		t.Fatalf("the three processes' probes: %v, want one granted", answers)
	}
	for _, p := range procs {
		fmt.Fprintln(p.in, "exit")
	}
}
