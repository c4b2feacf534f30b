package agent

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seed-a6839e30/dlm/dlm"
)

// The admin HTTP API. Every route but /healthz and /readyz needs the
// bearer token when one is configured.
//
//	GET /healthz       200 while the process runs (liveness)
//	GET /readyz        200 while the node serves with quorum, else 503
//	GET /metrics       Prometheus metrics (dlm's, Go's, the process's)
//	GET /debug/pprof/  Go's profiler
//	GET /v1/status     this node's dlm.Status as JSON
//	GET /v1/locks      this node's dlm.LockDump (?lockspace=&prefix=&limit=)
//	                   both with ?cluster=true: every live member's answer
//	GET /v1/members    the member set in force (Membership)
//	POST /v1/members/add|remove|replace   change it (members.go)
//	GET /              the page
const (
	// DefaultLockLimit caps /v1/locks when the request sets no limit, so
	// that a dump of a busy node stays a reasonable answer; limit=0 asks
	// for everything.
	DefaultLockLimit = 1000
	// tokenCookie carries the token for the page's own requests once the
	// operator has given it on /login.
	tokenCookie = "dlm_admin_token"
)

func (a *Agent) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.Handle("GET /metrics", a.auth(promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{a}})))
	mux.Handle("GET /debug/pprof/", a.auth(http.HandlerFunc(pprof.Index)))
	mux.Handle("GET /debug/pprof/cmdline", a.auth(http.HandlerFunc(pprof.Cmdline)))
	mux.Handle("GET /debug/pprof/profile", a.auth(http.HandlerFunc(pprof.Profile)))
	mux.Handle("GET /debug/pprof/symbol", a.auth(http.HandlerFunc(pprof.Symbol)))
	mux.Handle("GET /debug/pprof/trace", a.auth(http.HandlerFunc(pprof.Trace)))
	mux.Handle("GET /v1/status", a.auth(http.HandlerFunc(a.status)))
	mux.Handle("GET /v1/locks", a.auth(http.HandlerFunc(a.locks)))
	mux.Handle("GET /v1/members", a.auth(http.HandlerFunc(a.members)))
	mux.Handle("POST /v1/members/{change}", a.bearerOnly(http.HandlerFunc(a.changeMembers)))
	mux.Handle("GET /assets/", assetHandler()) // static files only, no data: the login page needs them
	mux.HandleFunc("GET /login", a.loginPage)
	mux.HandleFunc("POST /login", a.login)
	mux.Handle("GET /{$}", a.auth(http.HandlerFunc(a.page)))
	return mux
}

type slogPrinter struct{ a *Agent }

func (p slogPrinter) Println(v ...any) { p.a.log.Warn("metrics", "err", fmt.Sprint(v...)) }

// authorized reports whether r carries the token (as a bearer token, or
// the page's cookie); always true without a token.
func (a *Agent) authorized(r *http.Request) bool {
	if a.set.token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		if c, err := r.Cookie(tokenCookie); err == nil {
			got, ok = c.Value, true
		}
	}
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(a.set.token)) == 1
}

func (a *Agent) auth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.authorized(r) {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="dlm admin"`)
		if r.URL.Path == "/" {
			a.renderLogin(w, http.StatusUnauthorized, "")
			return
		}
		http.Error(w, "401 unauthorized: this agent needs its admin token (Authorization: Bearer ...)", http.StatusUnauthorized)
	})
}

func (a *Agent) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// readyz answers 200 only while the node serves with quorum: not while it
// joins, recovers a view, or has lost its quorum lease.
func (a *Agent) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	state := dlm.StateStarting
	if n := a.Node(); n != nil {
		// Serving implies the quorum lease: the node stops serving when
		// the lease ends.
		if state = n.State(); state == dlm.StateServing {
			fmt.Fprintln(w, state)
			return
		}
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintln(w, state)
}

// status serves /v1/status: this node's, or with cluster=true every live
// member's.
func (a *Agent) status(w http.ResponseWriter, r *http.Request) {
	n := a.Node()
	if n == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"state": string(dlm.StateStarting), "error": "the node has not joined the cluster yet"})
		return
	}
	if cluster, _ := strconv.ParseBool(r.URL.Query().Get("cluster")); cluster {
		writeJSON(w, http.StatusOK, a.gather.status(r.Context(), n))
		return
	}
	writeJSON(w, http.StatusOK, n.Status())
}

// dumpOptions reads ?lockspace=&prefix=&limit= .
func dumpOptions(r *http.Request) (dlm.DumpOptions, error) {
	q := r.URL.Query()
	l, err := parseLimit(q.Get("limit"))
	return dlm.DumpOptions{Lockspace: q.Get("lockspace"), Prefix: q.Get("prefix"), Limit: l}, err
}

// locks serves /v1/locks.
func (a *Agent) locks(w http.ResponseWriter, r *http.Request) {
	opts, err := dumpOptions(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	n := a.Node()
	if n == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"state": string(dlm.StateStarting), "error": "the node has not joined the cluster yet"})
		return
	}
	if cluster, _ := strconv.ParseBool(r.URL.Query().Get("cluster")); cluster {
		writeJSON(w, http.StatusOK, a.gather.locks(r.Context(), n, r.URL.Query()))
		return
	}
	writeJSON(w, http.StatusOK, n.LockDump(opts))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
