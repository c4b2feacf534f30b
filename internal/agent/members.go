package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
)

// The membership endpoints (dlmnode members):
//
//	GET  /v1/members          the configuration this node runs with
//	POST /v1/members/add      {"name": "n4"}
//	POST /v1/members/remove   {"name": "n3"}
//	POST /v1/members/replace  {"old": "n3", "new": "n6"}
//
// A change is made by the view's coordinator: an agent that does not
// coordinate passes the request on to the one that does (at the admin
// address it gossips), once. The answer of a change is the new
// configuration once the cluster runs it; a refused change changes
// nothing. The POSTs take a JSON body and the token as a bearer token
// only (the page's cookie does not do), so that a page of another site
// cannot make a browser change the cluster.

// Membership is the answer of /v1/members and of every change.
type Membership struct {
	// Node is the agent that answered (for a change, the coordinator
	// that made it), Coordinator the coordinator of its view.
	Node        string `json:"node"`
	ClusterID   string `json:"cluster_id"`
	Coordinator string `json:"coordinator,omitempty"`
	// Config is the member set in force: its version, members and, while
	// a change is half done, the old set.
	Config dlm.MembershipConfig `json:"config"`
	// Members are the members of Config (both sets while joint) as Node
	// sees them: live, in its view, their addresses.
	Members []dlm.MemberStatus `json:"members"`
}

// MemberChange is the body of a change: Name for add and remove, Old and
// New for replace.
type MemberChange struct {
	Name string `json:"name,omitempty"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
}

// args is the change's names, for logs: "n4", or "n3 n6" for a replace.
func (c MemberChange) args() string {
	return strings.TrimSpace(strings.Join([]string{c.Name, c.Old, c.New}, " "))
}

// MembersError is the body of a refused request; Coordinator names the
// coordinator when the refusal is about it.
type MembersError struct {
	Error       string `json:"error"`
	Coordinator string `json:"coordinator,omitempty"`
}

const (
	// forwardedHeader marks a change passed on by another agent: it is
	// not passed on again.
	forwardedHeader = "Dlm-Forwarded-By"
	// maxChangeBody bounds a change's body: a few names.
	maxChangeBody = 4096
	// MaxChangeWait bounds how long an agent waits for a change to
	// complete: two view changes take well under a second, but a joint
	// step may wait for a member's lease to run out.
	MaxChangeWait = 2 * time.Minute
)

func membershipOf(n *dlm.Node) Membership {
	st := n.Status()
	return Membership{Node: st.Name, ClusterID: st.ClusterID, Coordinator: st.Coordinator, Config: st.Membership, Members: st.Members}
}

// members serves GET /v1/members.
func (a *Agent) members(w http.ResponseWriter, _ *http.Request) {
	n := a.Node()
	if n == nil {
		writeJSON(w, http.StatusServiceUnavailable, MembersError{Error: "the node has not joined the cluster yet"})
		return
	}
	writeJSON(w, http.StatusOK, membershipOf(n))
}

// changeKind is one of the three changes.
type changeKind struct {
	verb string
	// check validates the body against the configuration in force: the
	// HTTP status and message of a refusal, or 0.
	check func(c MemberChange, cur dlm.MembershipConfig) (int, string)
	do    func(ctx context.Context, n *dlm.Node, c MemberChange) (dlm.MembershipConfig, error)
}

var changeKinds = map[string]changeKind{
	"add": {
		verb: "add",
		check: func(c MemberChange, cur dlm.MembershipConfig) (int, string) {
			switch {
			case c.Name == "" || c.Old != "" || c.New != "":
				return http.StatusBadRequest, `add takes {"name": "NEW-MEMBER"}`
			case slices.Contains(cur.Members, c.Name):
				return http.StatusConflict, fmt.Sprintf("%s is a member already (membership v%d: %s)", c.Name, cur.Version, strings.Join(cur.Members, " "))
			}
			return 0, ""
		},
		do: func(ctx context.Context, n *dlm.Node, c MemberChange) (dlm.MembershipConfig, error) {
			return n.AddMember(ctx, c.Name)
		},
	},
	"remove": {
		verb: "remove",
		check: func(c MemberChange, cur dlm.MembershipConfig) (int, string) {
			switch {
			case c.Name == "" || c.Old != "" || c.New != "":
				return http.StatusBadRequest, `remove takes {"name": "MEMBER"}`
			case !slices.Contains(cur.Members, c.Name):
				return http.StatusNotFound, fmt.Sprintf("%s is not a member (membership v%d: %s)", c.Name, cur.Version, strings.Join(cur.Members, " "))
			case len(cur.Members) == 1:
				return http.StatusConflict, fmt.Sprintf("%s is the only member: a cluster cannot remove its last member", c.Name)
			}
			return 0, ""
		},
		do: func(ctx context.Context, n *dlm.Node, c MemberChange) (dlm.MembershipConfig, error) {
			return n.RemoveMember(ctx, c.Name)
		},
	},
	"replace": {
		verb: "replace",
		check: func(c MemberChange, cur dlm.MembershipConfig) (int, string) {
			switch {
			case c.Old == "" || c.New == "" || c.Name != "":
				return http.StatusBadRequest, `replace takes {"old": "MEMBER", "new": "NEW-MEMBER"}`
			case c.Old == c.New:
				return http.StatusBadRequest, fmt.Sprintf("replace %s by itself: old and new must differ", c.Old)
			case !slices.Contains(cur.Members, c.Old):
				return http.StatusNotFound, fmt.Sprintf("%s is not a member (membership v%d: %s)", c.Old, cur.Version, strings.Join(cur.Members, " "))
			case slices.Contains(cur.Members, c.New):
				return http.StatusConflict, fmt.Sprintf("%s is a member already (membership v%d: %s)", c.New, cur.Version, strings.Join(cur.Members, " "))
			}
			return 0, ""
		},
		do: func(ctx context.Context, n *dlm.Node, c MemberChange) (dlm.MembershipConfig, error) {
			return n.ReplaceMember(ctx, c.Old, c.New)
		},
	},
}

// changeMembers serves POST /v1/members/{change}.
func (a *Agent) changeMembers(w http.ResponseWriter, r *http.Request) {
	kind, ok := changeKinds[r.PathValue("change")]
	if !ok {
		writeJSON(w, http.StatusNotFound, MembersError{Error: fmt.Sprintf("no membership change %q: add, remove or replace", r.PathValue("change"))})
		return
	}
	body, code, msg := readChange(w, r)
	if code != 0 {
		writeJSON(w, code, MembersError{Error: msg})
		return
	}
	n := a.Node()
	if n == nil {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, MembersError{Error: "the node has not joined the cluster yet"})
		return
	}
	if code, msg := kind.check(body, n.Membership()); code != 0 {
		writeJSON(w, code, MembersError{Error: msg})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), MaxChangeWait)
	defer cancel()
	cfg, err := kind.do(ctx, n, body)
	var nc *dlm.NotCoordinatorError
	switch {
	case err == nil:
		a.log.Info("membership changed through the admin API", "change", kind.verb, "args", body.args(), "version", cfg.Version, "members", cfg.Members, "remote", r.RemoteAddr)
		m := membershipOf(n)
		m.Config = cfg // the configuration the change made, even if a later one is in force already
		writeJSON(w, http.StatusOK, m)
	case errors.As(err, &nc):
		a.forwardChange(w, r, n, kind.verb, body, nc.Coordinator)
	case errors.Is(err, dlm.ErrChangeInProgress):
		writeJSON(w, http.StatusConflict, MembersError{Error: err.Error()})
	case errors.Is(err, dlm.ErrBadMemberName):
		writeJSON(w, http.StatusBadRequest, MembersError{Error: err.Error()})
	case errors.Is(err, dlm.ErrBadChange):
		writeJSON(w, http.StatusConflict, MembersError{Error: err.Error()})
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		writeJSON(w, http.StatusGatewayTimeout, MembersError{Error: fmt.Sprintf(
			"the %s did not complete in time (%v); if its joint step was agreed the cluster completes it: see GET /v1/members", kind.verb, err)})
	default:
		writeJSON(w, http.StatusInternalServerError, MembersError{Error: err.Error()})
	}
}

// readChange reads a change's JSON body: 0, or the HTTP status and
// message of the refusal.
func readChange(w http.ResponseWriter, r *http.Request) (MemberChange, int, string) {
	var c MemberChange
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/json" {
		return c, http.StatusUnsupportedMediaType, "a membership change takes a JSON body (Content-Type: application/json)"
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxChangeBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return c, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", maxChangeBody)
		}
		return c, http.StatusBadRequest, "malformed body: " + err.Error()
	}
	if dec.More() {
		return c, http.StatusBadRequest, "malformed body: more than one JSON value"
	}
	if _, err := dec.Token(); err != io.EOF {
		return c, http.StatusBadRequest, "malformed body: data after the JSON value"
	}
	return c, 0, ""
}

// forwardChange passes a change on to the coordinator's agent, once, and
// relays its answer.
func (a *Agent) forwardChange(w http.ResponseWriter, r *http.Request, n *dlm.Node, verb string, body MemberChange, coordinator string) {
	refuse := func(code int, format string, args ...any) {
		if code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		writeJSON(w, code, MembersError{Error: fmt.Sprintf(format, args...), Coordinator: coordinator})
	}
	if coordinator == "" {
		refuse(http.StatusServiceUnavailable, "no coordinator is known yet: the cluster is forming a view; try again")
		return
	}
	if by := r.Header.Get(forwardedHeader); by != "" {
		refuse(http.StatusServiceUnavailable, "%s passed this change on to %s, which no longer coordinates (%s does); try again", by, n.Name(), coordinator)
		return
	}
	target := ""
	for _, m := range n.Status().Members {
		if m.Name == coordinator {
			target = m.Tags[AdminTag]
		}
	}
	if target == "" {
		refuse(http.StatusBadGateway, "changes are made by the coordinator, %s, which advertises no admin address: ask it (or its program) directly", coordinator)
		return
	}
	b, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(r.Context(), MaxChangeWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(target, "/")+"/v1/members/"+verb, bytes.NewReader(b))
	if err != nil {
		refuse(http.StatusBadGateway, "the coordinator %s advertises a bad admin address %q: %v", coordinator, target, err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(forwardedHeader, n.Name())
	if a.set.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.set.token)
	}
	resp, err := a.forward.Do(req)
	if err != nil {
		refuse(http.StatusBadGateway, "passing the change on to the coordinator %s at %s: %v", coordinator, target, err)
		return
	}
	defer resp.Body.Close()
	a.log.Info("membership change passed on to the coordinator", "change", verb, "args", body.args(), "coordinator", coordinator, "status", resp.StatusCode)
	for _, h := range []string{"Content-Type", "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, io.LimitReader(resp.Body, 1<<20))
}

// bearerOnly is auth for the changes: the token in the Authorization
// header, not the page's cookie.
func (a *Agent) bearerOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.set.token != "" {
			r.Header.Del("Cookie")
		}
		a.auth(h).ServeHTTP(w, r)
	})
}
