package check

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// An Observation is a reader's view of an election: who it was told leads.
type Observation struct {
	Client int           `json:"client"`
	Node   string        `json:"node"`
	Call   time.Duration `json:"call_ns"`
	Return time.Duration `json:"return_ns"`
	// Leader says a leader was reported (else "no leader"), with its
	// token; Valid is the value block's flag (false: the leader was lost
	// without resigning and the news may be stale).
	Leader bool   `json:"leader"`
	Token  uint64 `json:"token"`
	Valid  bool   `json:"valid"`
}

// ElectionResult is what CheckElection found.
type ElectionResult struct {
	Terms, Observations int
	Violations          []string
}

// OK reports whether no violation was found.
func (r ElectionResult) OK() bool { return len(r.Violations) == 0 }

// CheckElection checks what readers were told about the election whose
// lock is resource. Its terms are the campaigns in h: Acquires of resource
// granted (the leader's token is the grant's). Exclusion between leaders
// and their tokens' order are CheckOverlap's and CheckTokens' business; this
// checks the readers:
//
//   - a leader reported (valid) is the winner of a campaign called before
//     the read returned: no phantom leader (a token no recorded campaign
//     won may be that of a campaign of unknown outcome called before);
//   - it is not older than a leader whose campaign had returned before the
//     read was called: no stale leader once a newer one is established;
//   - one reader's valid leaders never go back.
func CheckElection(h *History, resource string, obs []Observation) ElectionResult {
	type term struct {
		token     uint64
		call, ret time.Duration
		client    int
		node      string
	}
	var terms []term
	byToken := make(map[uint64]term)
	// Campaigns of unknown outcome may have won. One whose grant came
	// back after its node's crash or freeze had made it Unknown won with
	// the token of that late grant; one that never came back may have won
	// with a token nobody recorded: a token no campaign won is a phantom
	// only if no such campaign had been called before the read returned.
	var unknown []time.Duration
	late := make(map[uint64]time.Duration)
	for _, r := range h.Records() {
		if r.Kind == Acquire && r.Resource == resource && r.Outcome == Unknown && !r.Shared {
			if t := r.late; t != 0 {
				late[t] = r.Call
			} else {
				unknown = append(unknown, r.Call)
			}
		}
		if r.Kind == Acquire && r.Resource == resource && r.Outcome == OK && !r.Shared {
			t := term{token: r.Token, call: r.Call, ret: r.Return, client: r.Client, node: r.Node}
			terms = append(terms, t)
			byToken[t.token] = t
		}
	}
	slices.SortFunc(terms, func(a, b term) int { return cmp.Compare(a.ret, b.ret) })
	res := ElectionResult{Terms: len(terms), Observations: len(obs)}
	last := make(map[int]Observation)
	sorted := slices.Clone(obs)
	slices.SortStableFunc(sorted, func(a, b Observation) int { return cmp.Compare(a.Call, b.Call) })
	for _, o := range sorted {
		if !o.Leader || !o.Valid {
			continue
		}
		who := fmt.Sprintf("reader %d on %s, [%s, %s]", o.Client, o.Node, fmtTime(o.Call), fmtTime(o.Return))
		t, ok := byToken[o.Token]
		lateCall, wonLate := late[o.Token]
		switch {
		case !ok && wonLate && lateCall < o.Return:
			// The winner of a campaign whose node froze or died before
			// the grant came back.
		case !ok && slices.ContainsFunc(unknown, func(c time.Duration) bool { return c < o.Return }):
			// The winner of a campaign whose answer was lost.
		case !ok:
			res.Violations = append(res.Violations, fmt.Sprintf("%s was told of leader token %d, which no campaign won", who, o.Token))
		case t.call > o.Return:
			res.Violations = append(res.Violations, fmt.Sprintf("%s was told of leader token %d, whose campaign began only at %s", who, o.Token, fmtTime(t.call)))
		}
		for _, n := range terms {
			if n.ret >= o.Call {
				break
			}
			if n.token > o.Token {
				res.Violations = append(res.Violations, fmt.Sprintf(
					"%s was told of leader token %d, but client %d on %s had won with token %d at %s, before the read",
					who, o.Token, n.client, n.node, n.token, fmtTime(n.ret)))
				break
			}
		}
		if p, ok := last[o.Client]; ok && o.Token < p.Token {
			res.Violations = append(res.Violations, fmt.Sprintf("%s was told of leader token %d after token %d", who, o.Token, p.Token))
		}
		last[o.Client] = o
	}
	return res
}
