package transport

// HelperReads reports whether a goroutine waiting in Call or Await holds
// the reading of the connection to peer: what the lending tests need to
// know that they exercised it.
func HelperReads(l *Links, peer string) bool {
	p, err := l.peer(peer)
	if err != nil {
		return false
	}
	r := p.reader.Load()
	return r != nil && r.role.Load() == roleHelper
}
