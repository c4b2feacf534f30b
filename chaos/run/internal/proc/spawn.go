package proc

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// spawner starts children from one OS thread locked for the supervisor's
// life. PR_SET_PDEATHSIG fires when the thread that forked the child ends,
// not the process: Go may end an idle thread at any time, so forking from
// arbitrary goroutines would kill children at random.
type spawner struct {
	reqs chan spawnReq
	done chan struct{}

	mu     sync.Mutex
	closed bool
}

type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

func newSpawner() *spawner {
	sp := &spawner{reqs: make(chan spawnReq), done: make(chan struct{})}
	go sp.loop()
	return sp
}

func (sp *spawner) loop() {
	runtime.LockOSThread() // never unlocked: the thread ends with the loop
	defer close(sp.done)
	for r := range sp.reqs {
		r.err <- r.cmd.Start()
	}
}

func (sp *spawner) start(cmd *exec.Cmd) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		return errors.New("supervisor closed")
	}
	err := make(chan error, 1)
	sp.reqs <- spawnReq{cmd: cmd, err: err}
	return <-err
}

// close ends the spawner's thread. Children started from it then lose
// their parent-death guard, so the supervisor closes it only after they
// are gone.
func (sp *spawner) close() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.closed {
		sp.closed = true
		close(sp.reqs)
		<-sp.done
	}
}

// procState reads the state letter of /proc/PID/stat (R, S, D, T, Z, ...).
func procState(pid int) (byte, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name is in parentheses and may hold anything: the
	// state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0, &os.PathError{Op: "parse", Path: "/proc/" + strconv.Itoa(pid) + "/stat", Err: os.ErrInvalid}
	}
	return s[i+2], nil
}
