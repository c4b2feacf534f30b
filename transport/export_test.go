package transport

import "time"

// HelperReads reports whether a goroutine waiting in Call or Await holds
// the reading of the connection to peer: what the lending tests need to
// know that they exercised it.
func HelperReads(l *Links, peer string) bool { return readingIs(l, peer, roleHelper) }

// ReadingFree reports whether nobody holds the reading of the connection
// to peer: its reader goroutine is parked and no helper reads.
func ReadingFree(l *Links, peer string) bool { return readingIs(l, peer, roleFree) }

func readingIs(l *Links, peer string, role uint32) bool {
	p, err := l.peer(peer)
	if err != nil {
		return false
	}
	r := p.reader.Load()
	return r != nil && r.role.Load() == role
}

// SlowWatcher makes a link's parked reader goroutine look at the connection
// only every d instead of every 20 µs: a tweak for tcpPairWith.
func SlowWatcher(d time.Duration) func(*Config) {
	return func(c *Config) { c.watcherPark = d }
}
