package workload

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
)

// Register is the fenced register the clients write to, wherever it lives.
type Register interface {
	// Write stores value under key if token is at least the highest
	// accepted for key. It reports whether it did, and whether a higher
	// token had been accepted before. An error means the answer was lost.
	Write(key string, token uint64, value int64) (accepted, newer bool, err error)
}

// Store is the fenced register: per key, it refuses a write whose token is
// below the highest it accepted (equal tokens pass, so a holder may write
// repeatedly). It lives in the harness, where no nemesis reaches it, like
// the database a lock protects; workers reach it through Serve.
type Store struct {
	mu   sync.Mutex
	keys map[string]entry
}

type entry struct {
	max   uint64
	value int64
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{keys: make(map[string]entry)} }

// Write implements Register.
func (s *Store) Write(key string, token uint64, value int64) (accepted, newer bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.keys[key]
	if token < e.max {
		return false, true, nil
	}
	s.keys[key] = entry{max: token, value: value}
	return true, false, nil
}

// Read returns the value of key (0 if never written).
func (s *Store) Read(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[key].value
}

// MaxToken returns the highest token accepted for key.
func (s *Store) MaxToken(key string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[key].max
}

// Serve answers writes from RemoteStores on l until l is closed; each
// connection is served in order, a line per write ("KEY TOKEN VALUE"), a
// line per answer ("A" accepted, "R" refused). It returns when l is closed
// and every connection is gone.
func (s *Store) Serve(l net.Listener) {
	var wg sync.WaitGroup
	defer wg.Wait()
	var mu sync.Mutex
	conns := make(map[net.Conn]bool)
	defer func() {
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		mu.Lock()
		conns[c] = true
		mu.Unlock()
		wg.Go(func() {
			defer func() {
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
				c.Close()
			}()
			s.serveConn(c)
		})
	}
}

func (s *Store) serveConn(c net.Conn) {
	sc := bufio.NewScanner(c)
	w := bufio.NewWriter(c)
	for sc.Scan() {
		var key string
		var token uint64
		var value int64
		if _, err := fmt.Sscanf(sc.Text(), "%s %d %d", &key, &token, &value); err != nil {
			fmt.Fprintf(w, "E %v\n", err)
		} else if ok, _, _ := s.Write(key, token, value); ok {
			w.WriteString("A\n")
		} else {
			w.WriteString("R\n")
		}
		if w.Flush() != nil {
			return
		}
	}
}

// RemoteStore is a Store in another process, reached over a Unix socket:
// one connection per client goroutine at a time, taken from a pool.
type RemoteStore struct {
	path string
	mu   sync.Mutex
	idle []*storeConn
}

type storeConn struct {
	c  net.Conn
	rd *bufio.Reader
}

// NewRemoteStore returns a client of the Store served at the Unix socket
// path.
func NewRemoteStore(path string) *RemoteStore { return &RemoteStore{path: path} }

// Write implements Register. A refused write always had a higher token
// before it (that is the store's rule), so newer is !accepted.
func (r *RemoteStore) Write(key string, token uint64, value int64) (accepted, newer bool, err error) {
	if key == "" || strings.ContainsAny(key, " \t\n") {
		return false, false, fmt.Errorf("store: bad key %q", key)
	}
	r.mu.Lock()
	var sc *storeConn
	if n := len(r.idle); n > 0 {
		sc, r.idle = r.idle[n-1], r.idle[:n-1]
	}
	r.mu.Unlock()
	if sc == nil {
		c, err := net.Dial("unix", r.path)
		if err != nil {
			return false, false, err
		}
		sc = &storeConn{c: c, rd: bufio.NewReader(c)}
	}
	if _, err := fmt.Fprintf(sc.c, "%s %d %d\n", key, token, value); err != nil {
		sc.c.Close()
		return false, false, err
	}
	line, err := sc.rd.ReadString('\n')
	if err != nil {
		sc.c.Close()
		return false, false, err
	}
	r.mu.Lock()
	r.idle = append(r.idle, sc)
	r.mu.Unlock()
	switch line {
	case "A\n":
		return true, false, nil
	case "R\n":
		return false, true, nil
	}
	return false, false, errors.New("store: " + strings.TrimSpace(line))
}

// Close closes the idle connections.
func (r *RemoteStore) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sc := range r.idle {
		sc.c.Close()
	}
	r.idle = nil
}
