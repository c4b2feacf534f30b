package recovery

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/internal/syncbuf"
)

// TestStalledAgreementIsLogged: when the coordinator's proposals keep
// failing, it says so (after stallWarnAfter, not at every round), naming
// the member that refused and its reason; once a view commits it says
// that too.
func TestStalledAgreementIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncbuf.Buffer
		names := []string{"a", "b", "c"}
		c := newTestCluster(t, names, names, func(cfg *Config) {
			if cfg.Name == "a" {
				cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			}
		})
		defer c.close()
		for _, m := range c.ms {
			<-m.Served()
		}
		c.ms["c"].Isolate("a test keeps it out")
		c.ms["a"].RequestResync()
		time.Sleep(stallWarnAfter / 2)
		if strings.Contains(logs.String(), "proposals keep failing") {
			t.Fatalf("logged before %v of failed rounds:\n%s", stallWarnAfter, logs.String())
		}
		time.Sleep(stallWarnAfter)
		out := logs.String()
		if n := strings.Count(out, "proposals keep failing"); n != 1 {
			t.Fatalf("%d stall lines after %v, want 1:\n%s", n, 3*stallWarnAfter/2, out)
		}
		for _, want := range []string{"member=c@", "this node is isolated: a test keeps it out"} {
			if !strings.Contains(out, want) {
				t.Fatalf("the stall line does not say %q:\n%s", want, out)
			}
		}
		c.ms["c"].Isolate("")
		waitView(t, c.ms["a"], 10*time.Second, func(v View) bool { return v.Epoch > 1 })
		time.Sleep(time.Millisecond)
		if !strings.Contains(logs.String(), "view agreed after failed proposals") {
			t.Fatalf("no line when the view committed:\n%s", logs.String())
		}
	})
}
