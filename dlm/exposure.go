package dlm

import (
	"net"
	"strings"
)

// Exposure is a listener of a node that is reachable beyond loopback
// without the protection it needs: anyone who can reach it may speak as a
// member (see docs/security.md).
type Exposure struct {
	// Listener is "links" (lock traffic) or "gossip".
	Listener string
	// Addr is the address it binds.
	Addr string
	// Missing is what would protect it: "TLS" for the links, "GossipKey"
	// for gossip.
	Missing string
}

// Exposures lists the listeners the configuration binds off loopback
// without TLS (links) or a gossip key (gossip). Start logs a warning for
// each; the dlmnode agent refuses to start with any unless told
// --insecure. Listeners replaced by Streams or GossipTransport are the
// caller's to judge, and not listed.
func (c *Config) Exposures() []Exposure {
	var out []Exposure
	if c.Streams == nil && c.TLS == nil && !loopbackAddr(c.LinkAddr) {
		out = append(out, Exposure{Listener: "links", Addr: c.LinkAddr, Missing: "TLS"})
	}
	if c.GossipTransport == nil && len(c.GossipKey) == 0 && !loopbackAddr(c.GossipAddr) {
		out = append(out, Exposure{Listener: "gossip", Addr: c.GossipAddr, Missing: "GossipKey"})
	}
	return out
}

// LoopbackAddr reports whether a host:port binds loopback only: an IP of
// 127.0.0.0/8 or ::1, or "localhost". Every interface ("", 0.0.0.0, ::)
// and any other name are not.
func LoopbackAddr(addr string) bool { return loopbackAddr(addr) }

func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// warnExposures logs what Exposures finds, once, at Start.
func (n *Node) warnExposures() {
	for _, e := range n.cfg.Exposures() {
		switch e.Missing {
		case "TLS":
			n.log.Warn("lock traffic listens beyond loopback without TLS: anyone who reaches it and knows a member's name can speak as that member; set Config.TLS", "addr", e.Addr)
		default:
			n.log.Warn("gossip listens beyond loopback without a key: anyone who reaches it can join or disturb the membership; set Config.GossipKey", "addr", e.Addr)
		}
	}
}
