package agent

import (
	"cmp"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
)

// The page at / is rendered here from html/template and the files in web/,
// embedded in the binary: no build step, nothing fetched from elsewhere
// (its Content-Security-Policy allows this origin only). web/app.js
// refreshes it by fetching /?fragment=1, the same template's content block,
// every two seconds.

//go:embed web
var webFiles embed.FS

var pageTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"dur":   FormatDuration,
	"since": func(t time.Time) string { return FormatDuration(time.Since(t)) },
	"clock": func(t time.Time) string { return t.Format("15:04:05") },
}).ParseFS(webFiles, "web/*.html"))

const contentSecurityPolicy = "default-src 'self'; img-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'"

func assetHandler() http.Handler {
	sub, _ := fs.Sub(webFiles, "web")
	return http.StripPrefix("/assets/", http.FileServerFS(sub))
}

// pageLocks is how many resources each node's part of the page lists.
const pageLocks = 25

type pageData struct {
	Node        string
	ClusterID   string
	State       string
	Epoch       uint64
	Coordinator string
	Quorum      int
	InView      int
	HasQuorum   bool
	Membership  dlm.MembershipConfig
	Members     []pageMember
	Contended   []pageContended
	Locks       []pageLock
	MoreLocks   bool
	Recoveries  []dlm.RecoveryRecord
	Deadlocks   []dlm.DeadlockRecord
	Errors      []string
	Updated     time.Time
}

type pageMember struct {
	Name, State, AdminURL, LinkAddr, GossipAddr, Error string
	Self, Live, InView                                 bool
	Epoch                                              uint64
	Resources, Locks, Queued, Held, Requests           int
}

type pageContended struct {
	Lockspace, Resource, Master string
	Queued                      int
}

type pageLock struct {
	Lockspace, Resource, Master, Queue string
	ID                                 uint64
	Node                               string
	Owner                              uint64
	Mode, Requested                    string
	Token                              uint64
	Wait, TTL                          time.Duration
}

// page serves / (and its refreshed content, ?fragment=1).
func (a *Agent) page(w http.ResponseWriter, r *http.Request) {
	data := a.pageData(r.Context())
	name := "page"
	if r.URL.Query().Get("fragment") == "1" {
		name = "content"
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
	w.Header().Set("Cache-Control", "no-store")
	if err := pageTemplates.ExecuteTemplate(w, name, data); err != nil {
		a.log.Warn("page", "err", err)
	}
}

func (a *Agent) pageData(ctx context.Context) pageData {
	d := pageData{Node: a.cfg.Name, ClusterID: a.cfg.ClusterID, State: string(dlm.StateStarting), Updated: time.Now()}
	n := a.Node()
	if n == nil {
		d.Membership = dlm.MembershipConfig{Members: a.cfg.Members}
		for _, m := range a.cfg.Members {
			d.Members = append(d.Members, pageMember{Name: m, Self: m == a.cfg.Name, State: "?"})
		}
		d.Errors = append(d.Errors, "this node has not joined the cluster yet")
		return d
	}
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	st := n.Status()
	d.State, d.Epoch, d.Coordinator, d.Quorum, d.HasQuorum = string(st.State), st.Epoch, st.Coordinator, st.Quorum, st.HasQuorum
	d.Recoveries, d.Membership = st.Recoveries, st.Membership
	cs := a.gather.status(ctx, n)
	cl := a.gather.locks(ctx, n, url.Values{"limit": {strconv.Itoa(pageLocks)}})
	answers := map[string]NodeStatus{}
	for _, ns := range cs.Nodes {
		answers[ns.Node] = ns
	}
	for _, m := range st.Members {
		pm := pageMember{Name: m.Name, Self: m.Self, Live: m.Live, InView: m.InView, AdminURL: m.Tags[AdminTag], LinkAddr: m.LinkAddr, GossipAddr: m.GossipAddr, State: "down"}
		if m.InView {
			d.InView++
		}
		if ns, ok := answers[m.Name]; ok {
			pm.Error = ns.Error
			pm.State = "live"
			if s := ns.Status; s != nil {
				pm.State, pm.Epoch = string(s.State), s.Epoch
				for _, ls := range s.Lockspaces {
					pm.Resources += ls.Resources
					pm.Locks += ls.Locks
					pm.Queued += ls.Converting + ls.Waiting
					pm.Held += ls.Held
					pm.Requests += ls.Requests
					for _, c := range ls.MostWaiters {
						d.Contended = append(d.Contended, pageContended{Lockspace: ls.Name, Resource: c.Resource, Master: s.Name, Queued: c.Queued})
					}
				}
				d.Deadlocks = append(d.Deadlocks, s.Deadlocks...)
			}
		}
		d.Members = append(d.Members, pm)
	}
	slices.SortFunc(d.Contended, func(a, b pageContended) int {
		if c := cmp.Compare(b.Queued, a.Queued); c != 0 {
			return c
		}
		return cmp.Compare(a.Resource, b.Resource)
	})
	d.Contended = d.Contended[:min(len(d.Contended), 10)]
	slices.SortFunc(d.Deadlocks, func(a, b dlm.DeadlockRecord) int { return b.At.Compare(a.At) })
	d.Deadlocks = d.Deadlocks[:min(len(d.Deadlocks), 10)]
	for _, nl := range cl.Nodes {
		if nl.Locks == nil {
			continue
		}
		d.MoreLocks = d.MoreLocks || nl.Locks.Truncated
		for _, r := range nl.Locks.Resources {
			for _, q := range []struct {
				name  string
				locks []dlm.LockInfo
			}{{"granted", r.Granted}, {"converting", r.Converting}, {"waiting", r.Waiting}} {
				for _, l := range q.locks {
					d.Locks = append(d.Locks, pageLock{
						Lockspace: r.Lockspace, Resource: r.Name, Master: r.Master, Queue: q.name,
						ID: l.ID, Node: l.Node, Owner: l.Owner, Mode: l.Mode.String(), Requested: l.Requested.String(),
						Token: l.Token, Wait: l.Wait, TTL: l.TTL,
					})
				}
			}
		}
	}
	slices.SortStableFunc(d.Locks, func(a, b pageLock) int {
		if c := cmp.Compare(a.Lockspace, b.Lockspace); c != 0 {
			return c
		}
		return cmp.Compare(a.Resource, b.Resource)
	})
	return d
}

// FormatDuration rounds a duration for people: 1.23s, 56.7ms, 789µs.
func FormatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

func (a *Agent) loginPage(w http.ResponseWriter, _ *http.Request) {
	a.renderLogin(w, http.StatusOK, "")
}

func (a *Agent) renderLogin(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
	w.WriteHeader(code)
	_ = pageTemplates.ExecuteTemplate(w, "login", map[string]string{"Node": a.cfg.Name, "Message": msg})
}

// login takes the token from the login form and keeps it in a cookie for
// the page's own requests (HttpOnly, this site only).
func (a *Agent) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if a.set.token == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	tok := r.PostFormValue("token")
	r.Header.Set("Authorization", "Bearer "+tok)
	if !a.authorized(r) {
		a.renderLogin(w, http.StatusUnauthorized, fmt.Sprintf("That is not %s's admin token.", a.cfg.Name))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
