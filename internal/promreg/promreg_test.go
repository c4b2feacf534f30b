package promreg

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func counter(name string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: name})
}

func TestAllOrNoneAndAgain(t *testing.T) {
	reg := prometheus.NewRegistry()
	taken := counter("b_total")
	if err := reg.Register(taken); err != nil {
		t.Fatal(err)
	}
	a := counter("a_total")
	_, err := Register(reg, a, counter("b_total"))
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Fatalf("Register with a taken name: %v", err)
	}
	if !reg.Unregister(taken) || reg.Unregister(a) {
		t.Fatal("a failed Register left a_total registered")
	}
	g, err := Register(reg, a, counter("b_total"))
	if err != nil {
		t.Fatal(err)
	}
	g.Unregister()
	g.Unregister()
	if _, err := Register(reg, counter("a_total"), counter("b_total")); err != nil {
		t.Fatalf("register again after Unregister: %v", err)
	}
}

func TestNilRegisterer(t *testing.T) {
	g, err := Register(nil, counter("a_total"))
	if err != nil {
		t.Fatal(err)
	}
	g.Unregister()
	var none *Group
	none.Unregister()
}
