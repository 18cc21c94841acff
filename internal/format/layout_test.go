package format

import (
	"path/filepath"
	"testing"
)

func TestLayerName(t *testing.T) {
	for _, c := range []struct {
		id    uint64
		layer int
	}{{1, 0}, {42, 63}, {^uint64(0), 255}} {
		name := LayerName(c.id, c.layer)
		id, layer, ok := ParseLayerName(name)
		if !ok || id != c.id || layer != c.layer {
			t.Errorf("ParseLayerName(%q) = %d, %d, %v; want %d, %d", name, id, layer, ok, c.id, c.layer)
		}
		if got, want := LayerPath("d", c.id, c.layer), filepath.Join("d", FiltersName, name); got != want {
			t.Errorf("LayerPath = %q, want %q", got, want)
		}
	}
	if LayerName(7, 2) != "7-2.flt" {
		t.Errorf("LayerName(7, 2) = %q, want 7-2.flt (part of the format)", LayerName(7, 2))
	}
	for _, name := range []string{"", "1-0", "1-0.flt.tmp", "1.flt", "-0.flt", "1--1.flt", "x-0.flt", "1-x.flt",
		"01-0.flt", "1-00.flt", "1-+0.flt", "+1-0.flt", "1-0-0.flt", "18446744073709551616-0.flt"} {
		if id, layer, ok := ParseLayerName(name); ok {
			t.Errorf("ParseLayerName(%q) = %d, %d, true; want not a layer name", name, id, layer)
		}
	}
}
