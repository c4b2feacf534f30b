package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/recovery"
)

// request sends method path with body (as JSON unless contentType says
// otherwise) and header, and returns the status and the body.
func request(t *testing.T, method, u, contentType, body string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func membership(t *testing.T, base, token string) Membership {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var m Membership
	if err := Fetch(ctx, base, "/v1/members", nil, token, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMembersBadInput: every bad membership request is refused with its
// status and a message saying what is wrong, and changes nothing: the
// configuration stays version 0 and nothing is stored in the data
// directory.
func TestMembersBadInput(t *testing.T) {
	dataDir := t.TempDir()
	a, stop := runAgent(t, "--admin-token-file", writeFile(t, "token", "s3cret\n"), "--data-dir", dataDir)
	defer stop()
	base := "http://" + a.AdminAddr()
	bearer := http.Header{"Authorization": {"Bearer s3cret"}}
	const jsonType = "application/json"

	m := membership(t, base, "s3cret")
	if m.Node != "solo" || m.Coordinator != "solo" || m.Config.Version != 0 || !slices.Equal(m.Config.Members, []string{"solo"}) || len(m.Members) != 1 || !m.Members[0].Self {
		t.Fatalf("GET /v1/members: %+v", m)
	}
	if code, _ := get(t, base+"/v1/members", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/members without the token: %d, want 401", code)
	}

	// The login cookie opens the page but does not change the cluster.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(base+"/login", url.Values{"token": {"s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	cookie := http.Header{"Cookie": {resp.Cookies()[0].String()}}

	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name         string
		method, path string
		contentType  string
		body         string
		header       http.Header
		code         int
		want         string // in the answer
	}{
		{"no token", "POST", "/v1/members/add", jsonType, `{"name":"n2"}`, nil, 401, "admin token"},
		{"wrong token", "POST", "/v1/members/add", jsonType, `{"name":"n2"}`, http.Header{"Authorization": {"Bearer nope"}}, 401, "admin token"},
		{"the page's cookie", "POST", "/v1/members/remove", jsonType, `{"name":"solo"}`, cookie, 401, "admin token"},
		{"GET a change", "GET", "/v1/members/add", "", "", bearer, 405, ""},
		{"DELETE a change", "DELETE", "/v1/members/remove", jsonType, `{"name":"solo"}`, bearer, 405, ""},
		{"POST the list", "POST", "/v1/members", jsonType, `{"name":"n2"}`, bearer, 405, ""},
		{"unknown change", "POST", "/v1/members/promote", jsonType, `{"name":"n2"}`, bearer, 404, "add, remove or replace"},
		{"a form", "POST", "/v1/members/add", "application/x-www-form-urlencoded", "name=n2", bearer, 415, "JSON body"},
		{"no content type", "POST", "/v1/members/add", "", `{"name":"n2"}`, bearer, 415, "JSON body"},
		{"malformed JSON", "POST", "/v1/members/add", jsonType, `{"name":`, bearer, 400, "malformed body"},
		{"not an object", "POST", "/v1/members/add", jsonType, `"n2"`, bearer, 400, "malformed body"},
		{"unknown field", "POST", "/v1/members/add", jsonType, `{"nmae":"n2"}`, bearer, 400, `unknown field "nmae"`},
		{"two values", "POST", "/v1/members/add", jsonType, `{"name":"n2"} {"name":"n3"}`, bearer, 400, "more than one JSON value"},
		{"trailing data", "POST", "/v1/members/add", jsonType, `{"name":"n2"} x`, bearer, 400, "malformed body"},
		{"a huge body", "POST", "/v1/members/add", jsonType, `{"name":"` + strings.Repeat("y", 10000) + `"}`, bearer, 413, "larger than"},
		{"add without a name", "POST", "/v1/members/add", jsonType, `{}`, bearer, 400, `add takes {"name"`},
		{"add with old and new", "POST", "/v1/members/add", jsonType, `{"old":"solo","new":"n2"}`, bearer, 400, `add takes {"name"`},
		{"add a member twice", "POST", "/v1/members/add", jsonType, `{"name":"solo"}`, bearer, 409, "solo is a member already"},
		{"add a name too long", "POST", "/v1/members/add", jsonType, `{"name":"` + long + `"}`, bearer, 400, "bad member name"},
		{"add without a majority of the new set up", "POST", "/v1/members/add", jsonType, `{"name":"n2"}`, bearer, 409, "fewer than a majority"},
		{"remove a stranger", "POST", "/v1/members/remove", jsonType, `{"name":"n9"}`, bearer, 404, "n9 is not a member"},
		{"remove the last member", "POST", "/v1/members/remove", jsonType, `{"name":"solo"}`, bearer, 409, "cannot remove its last member"},
		{"replace with one name", "POST", "/v1/members/replace", jsonType, `{"name":"solo"}`, bearer, 400, `replace takes {"old"`},
		{"replace by itself", "POST", "/v1/members/replace", jsonType, `{"old":"solo","new":"solo"}`, bearer, 400, "old and new must differ"},
		{"replace a stranger", "POST", "/v1/members/replace", jsonType, `{"old":"n9","new":"n2"}`, bearer, 404, "n9 is not a member"},
		{"replace the only member by one that is down", "POST", "/v1/members/replace", jsonType, `{"old":"solo","new":"n2"}`, bearer, 409, "fewer than a majority"},
	} {
		code, body := request(t, tc.method, base+tc.path, tc.contentType, tc.body, tc.header)
		msg := body
		if code != 405 && code != 401 {
			var e MembersError
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" {
				t.Errorf("%s: the refusal is not a JSON error: %q", tc.name, body)
			}
			msg = e.Error
		}
		if code != tc.code || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %s %s: %d %q, want %d and %q", tc.name, tc.method, tc.path, code, msg, tc.code, tc.want)
		}
	}
	if m := membership(t, base, "s3cret"); m.Config.Version != 0 || !slices.Equal(m.Config.Members, []string{"solo"}) || m.Config.Joint() {
		t.Errorf("after the refused requests the membership is %+v, want version 0 of [solo]", m.Config)
	}
	if st := a.Node().Status(); st.State != dlm.StateServing {
		t.Errorf("after the refused requests the node is %s", st.State)
	}
	if _, err := os.Stat(filepath.Join(dataDir, recovery.StateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused change stored a configuration: %v", err)
	}

	// The client side: a refusal is an *AdminError carrying the message.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out Membership
	err = Post(ctx, base, "/v1/members/remove", "s3cret", MemberChange{Name: "n9"}, &out)
	var ae *AdminError
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Message != "n9 is not a member (membership v0: solo)" || ae.RetryAfter {
		t.Errorf("Post of a bad change: %#v", err)
	}
}

// runAgents starts in-process agents of one cluster named names, on
// loopback ports picked here, and waits until every one serves.
func runAgents(t *testing.T, names []string, extra ...string) ([]*Agent, []func()) {
	t.Helper()
	type ports struct{ gossip, link, admin string }
	free := func(udp bool) string {
		for range 20 {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			if !udp {
				l.Close()
				return addr
			}
			u, err := net.ListenPacket("udp", addr)
			l.Close()
			if err == nil {
				u.Close()
				return addr
			}
		}
		t.Fatal("no free port")
		return ""
	}
	var ps []ports
	var seeds []string
	for range names {
		p := ports{free(true), free(false), free(false)}
		ps = append(ps, p)
		seeds = append(seeds, p.gossip)
	}
	agents := make([]*Agent, len(names))
	stops := make([]func(), len(names))
	for i, name := range names {
		// A port picked free may be taken before the agent binds it (by
		// another test package running meanwhile): pick again.
		for try := 1; ; try++ {
			args := append([]string{"--name", name, "--members", strings.Join(names, ","), "--seeds", strings.Join(seeds, ","),
				"--gossip-addr", ps[i].gossip, "--link-addr", ps[i].link, "--admin-addr", ps[i].admin, "--client-addr", "",
				"--lease", "1500ms", "--heartbeat", "250ms", "--data-dir", filepath.Join(t.TempDir(), name)}, extra...)
			a, stop, err := tryStartAgent(t, args)
			if err == nil {
				agents[i], stops[i] = a, stop
				break
			}
			if try == 5 || !strings.Contains(err.Error(), "address already in use") {
				t.Fatal(err)
			}
			t.Logf("%s: %v; on other ports", name, err)
			ps[i] = ports{free(true), free(false), free(false)}
			seeds[i] = ps[i].gossip
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, a := range agents {
		for a.Node() == nil || a.Node().State() != dlm.StateServing {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not serve within 60 s", a.cfg.Name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return agents, stops
}

// TestMembersChangeThroughAnyAgent: a change asked of an agent that does
// not coordinate is passed on to the coordinator's agent (with the token)
// and made there; every agent then shows the new configuration. A change
// passed on once is not passed on again; a removal that would leave the
// new set without a majority up is refused and changes nothing.
func TestMembersChangeThroughAnyAgent(t *testing.T) {
	names := []string{"a1", "a2", "a3"}
	agents, stops := runAgents(t, names, "--admin-token-file", writeFile(t, "token", "tok\n"))
	defer func() {
		for _, s := range stops {
			s()
		}
	}()
	coord := agents[0].Node().Status().Coordinator
	var other *Agent
	for _, a := range agents {
		if a.cfg.Name != coord {
			other = a
			break
		}
	}
	base := func(a *Agent) string { return "http://" + a.AdminAddr() }
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Passed on once only: a request marked as passed on is refused by a
	// non-coordinator, naming the coordinator, with Retry-After.
	code, body := request(t, "POST", base(other)+"/v1/members/add", "application/json", `{"name":"a4"}`,
		http.Header{"Authorization": {"Bearer tok"}, forwardedHeader: {"elsewhere"}})
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"coordinator": "`+coord+`"`) || !strings.Contains(body, "no longer coordinates") {
		t.Errorf("a change passed on twice: %d %s", code, body)
	}

	var m Membership
	if err := Post(ctx, base(other), "/v1/members/add", "tok", MemberChange{Name: "a4"}, &m); err != nil {
		t.Fatalf("add a4 through %s: %v", other.cfg.Name, err)
	}
	if m.Node != coord || m.Config.Version != 2 || m.Config.Joint() || !slices.Equal(m.Config.Members, []string{"a1", "a2", "a3", "a4"}) {
		t.Fatalf("add a4 through %s: %+v, want version 2 made by %s", other.cfg.Name, m, coord)
	}
	waitMembership(t, agents, "tok", 2, []string{"a1", "a2", "a3", "a4"})
	var a4 dlm.MemberStatus
	for _, ms := range m.Members {
		if ms.Name == "a4" {
			a4 = ms
		}
	}
	if a4.Name != "a4" || a4.Live || a4.InView {
		t.Errorf("a4, not started, in the answer: %+v", a4)
	}

	// a4 never started: remove it again (4 → 3, all three up).
	if err := Post(ctx, base(other), "/v1/members/remove", "tok", MemberChange{Name: "a4"}, &m); err != nil {
		t.Fatalf("remove a4: %v", err)
	}
	waitMembership(t, agents, "tok", 4, names)

	// One member leaves; removing another of the two left would make
	// {the other two} the set, with only one of them up: refused.
	var down, asked, victim *Agent
	for i, a := range agents {
		if a.cfg.Name != coord && down == nil {
			down = a
			stops[i]()
		}
	}
	for _, a := range agents {
		switch {
		case a == down:
		case a.cfg.Name == coord:
			asked = a
		default:
			victim = a
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for asked.Node().Status().Epoch == 0 || inView(asked.Node(), down.cfg.Name) {
		if time.Now().After(deadline) {
			t.Fatalf("%s still in %s's view 30 s after it left", down.cfg.Name, asked.cfg.Name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	err := Post(ctx, base(asked), "/v1/members/remove", "tok", MemberChange{Name: victim.cfg.Name}, &m)
	var ae *AdminError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || !strings.Contains(ae.Message, "fewer than a majority") {
		t.Errorf("a removal leaving no majority up: %v", err)
	}
	for _, a := range []*Agent{asked, victim} {
		if got := membership(t, base(a), "tok"); got.Config.Version != 4 || !slices.Equal(got.Config.Members, names) {
			t.Errorf("after the refused removal %s runs %+v, want version 4 of %v", a.cfg.Name, got.Config, names)
		}
	}
}

func inView(n *dlm.Node, name string) bool {
	for _, m := range n.Status().Members {
		if m.Name == name && m.InView {
			return true
		}
	}
	return false
}

// waitMembership waits until every running agent answers version and
// members on /v1/members.
func waitMembership(t *testing.T, agents []*Agent, token string, version uint64, members []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range agents {
		for {
			m := membership(t, "http://"+a.AdminAddr(), token)
			if m.Config.Version == version && slices.Equal(m.Config.Members, members) && !m.Config.Joint() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s runs %+v, want version %d of %v", a.cfg.Name, m.Config, version, members)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestPageShowsMembership: the page's membership card shows the version
// and members, and during a joint configuration the set it changes from.
func TestPageShowsMembership(t *testing.T) {
	for _, tc := range []struct {
		cfg  dlm.MembershipConfig
		want []string
		not  string
	}{
		{dlm.MembershipConfig{Version: 2, Members: []string{"a1", "a2", "a3", "a4"}}, []string{`id="membership">v2: a1 a2 a3 a4<`}, "changing from"},
		{dlm.MembershipConfig{Version: 3, Members: []string{"a1", "a2", "a4"}, Old: []string{"a1", "a2", "a3"}},
			[]string{`id="membership">v3: a1 a2 a4<`, `id="membership-old">changing from a1 a2 a3<`, `class="card changing"`}, ""},
	} {
		var b bytes.Buffer
		if err := pageTemplates.ExecuteTemplate(&b, "content", pageData{Node: "a1", Membership: tc.cfg}); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%+v: the page lacks %s", tc.cfg, w)
			}
		}
		if tc.not != "" && strings.Contains(b.String(), tc.not) {
			t.Errorf("%+v: the page says %q", tc.cfg, tc.not)
		}
	}
}
