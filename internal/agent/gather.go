package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
)

// ClusterStatus is /v1/status?cluster=true: the answer of every live
// member, by name. A member whose agent could not be asked (it advertises
// no admin address: a node embedded in a program, say) has Error set.
type ClusterStatus struct {
	// From is the agent that gathered the answers.
	From  string       `json:"from"`
	Nodes []NodeStatus `json:"nodes"`
}

// NodeStatus is one member's answer in a ClusterStatus.
type NodeStatus struct {
	Node     string      `json:"node"`
	AdminURL string      `json:"admin_url,omitempty"`
	Status   *dlm.Status `json:"status,omitempty"`
	Error    string      `json:"error,omitempty"`
}

// ClusterLocks is /v1/locks?cluster=true: every live member's lock dump.
type ClusterLocks struct {
	From  string      `json:"from"`
	Nodes []NodeLocks `json:"nodes"`
}

// NodeLocks is one member's answer in a ClusterLocks.
type NodeLocks struct {
	Node     string        `json:"node"`
	AdminURL string        `json:"admin_url,omitempty"`
	Locks    *dlm.LockDump `json:"locks,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// gatherer asks the other agents of the cluster, at the admin addresses
// they gossip (AdminTag), with this agent's token: every agent of a
// cluster is expected to share one.
type gatherer struct {
	token  string
	client *http.Client
}

// peerTimeout bounds each member's answer, so that one stuck agent
// delays a cluster-wide answer by this much at most.
const peerTimeout = 3 * time.Second

func newGatherer(token string) *gatherer {
	return &gatherer{token: token, client: &http.Client{Timeout: peerTimeout}}
}

// peer is a live member to ask: its name and admin URL ("" if none).
type peer struct {
	name, url string
	self      bool
}

func livePeers(st dlm.Status) []peer {
	var out []peer
	for _, m := range st.Members {
		if m.Live {
			out = append(out, peer{name: m.Name, url: m.Tags[AdminTag], self: m.Self})
		}
	}
	return out
}

// each runs ask for every live member concurrently (the local one by
// local) and returns once all answered.
func (g *gatherer) each(ctx context.Context, st dlm.Status, local func(), ask func(ctx context.Context, i int, p peer) error, fail func(i int, p peer, err error)) {
	peers := livePeers(st)
	var wg sync.WaitGroup
	for i, p := range peers {
		if p.self {
			local()
			continue
		}
		if p.url == "" {
			fail(i, p, fmt.Errorf("%s advertises no admin address (not an agent, or started without one)", p.name))
			continue
		}
		wg.Go(func() {
			if err := ask(ctx, i, p); err != nil {
				fail(i, p, err)
			}
		})
	}
	wg.Wait()
}

func (g *gatherer) status(ctx context.Context, n *dlm.Node) ClusterStatus {
	st := n.Status()
	peers := livePeers(st)
	out := ClusterStatus{From: st.Name, Nodes: make([]NodeStatus, len(peers))}
	for i, p := range peers {
		out.Nodes[i] = NodeStatus{Node: p.name, AdminURL: p.url}
	}
	g.each(ctx, st, func() {
		for i, p := range peers {
			if p.self {
				out.Nodes[i].Status = &st
			}
		}
	}, func(ctx context.Context, i int, p peer) error {
		var s dlm.Status
		if err := g.get(ctx, p.url, "/v1/status", nil, &s); err != nil {
			return err
		}
		out.Nodes[i].Status = &s
		return nil
	}, func(i int, _ peer, err error) { out.Nodes[i].Error = err.Error() })
	return out
}

func (g *gatherer) locks(ctx context.Context, n *dlm.Node, query url.Values) ClusterLocks {
	st := n.Status()
	peers := livePeers(st)
	out := ClusterLocks{From: st.Name, Nodes: make([]NodeLocks, len(peers))}
	for i, p := range peers {
		out.Nodes[i] = NodeLocks{Node: p.name, AdminURL: p.url}
	}
	q := url.Values{}
	for _, k := range []string{"lockspace", "prefix", "limit"} {
		if v := query.Get(k); v != "" {
			q.Set(k, v)
		}
	}
	g.each(ctx, st, func() {
		opts := dlm.DumpOptions{Lockspace: q.Get("lockspace"), Prefix: q.Get("prefix"), Limit: DefaultLockLimit}
		if l, err := parseLimit(q.Get("limit")); err == nil {
			opts.Limit = l
		}
		for i, p := range peers {
			if p.self {
				d := n.LockDump(opts)
				out.Nodes[i].Locks = &d
			}
		}
	}, func(ctx context.Context, i int, p peer) error {
		var d dlm.LockDump
		if err := g.get(ctx, p.url, "/v1/locks", q, &d); err != nil {
			return err
		}
		out.Nodes[i].Locks = &d
		return nil
	}, func(i int, _ peer, err error) { out.Nodes[i].Error = err.Error() })
	return out
}

// parseLimit reads ?limit=: DefaultLockLimit if absent, 0 for no limit.
func parseLimit(s string) (int, error) {
	if s == "" {
		return DefaultLockLimit, nil
	}
	l, err := strconv.Atoi(s)
	if err != nil || l < 0 {
		return DefaultLockLimit, fmt.Errorf("limit %q: want a number ≥ 0 (0: no limit)", s)
	}
	return l, nil
}

// get fetches base+path?query as JSON into v.
func (g *gatherer) get(ctx context.Context, base, path string, query url.Values, v any) error {
	return fetchJSON(ctx, g.client, base, path, query, g.token, v)
}

// fetchJSON GETs base+path?query with the token (if any) and decodes the
// JSON answer into v; a non-200 answer is an error carrying its first line.
func fetchJSON(ctx context.Context, c *http.Client, base, path string, query url.Values, token string, v any) error {
	u := strings.TrimSuffix(base, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeAnswer(u, resp, v)
}

// AdminError is an admin endpoint's refusal: its HTTP status and what it
// said (the "error" of a JSON answer, else the first line).
type AdminError struct {
	URL        string
	Status     int
	Message    string
	RetryAfter bool // the server said to try again (nothing was done)
}

func (e *AdminError) Error() string {
	return fmt.Sprintf("%s: %d %s: %s", e.URL, e.Status, http.StatusText(e.Status), e.Message)
}

// decodeAnswer decodes a 200 answer's JSON into v, or returns an
// *AdminError.
func decodeAnswer(u string, resp *http.Response, v any) error {
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		msg := struct {
			Error string `json:"error"`
		}{}
		if json.Unmarshal(b, &msg) != nil || msg.Error == "" {
			msg.Error, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
		}
		return &AdminError{URL: u, Status: resp.StatusCode, Message: msg.Error, RetryAfter: resp.Header.Get("Retry-After") != ""}
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("%s: %w", u, err)
	}
	return nil
}

// Fetch is fetchJSON for dlmnode status, lockdump and members.
func Fetch(ctx context.Context, base, path string, query url.Values, token string, v any) error {
	return fetchJSON(ctx, &http.Client{Timeout: 2 * peerTimeout}, base, path, query, token, v)
}

// Post POSTs body as JSON to base+path with the token (if any) and
// decodes the JSON answer into v; ctx bounds it. A refusal is an
// *AdminError.
func Post(ctx context.Context, base, path, token string, body, v any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	u := strings.TrimSuffix(base, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeAnswer(u, resp, v)
}
