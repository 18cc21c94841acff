package store

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
)

// TestPromiseImportOddDescriptions: "A stream that fails a check returns an
// error wrapping ErrCorrupt and leaves nothing behind". Descriptions with
// valid checksums but configurations no Create accepts.
func TestPromiseImportOddDescriptions(t *testing.T) {
	src := mustOpen(t, t.TempDir(), nil)
	defer src.Close()
	b, _ := src.CreateBloom("b", BloomConfig{Capacity: 100})
	b.Add([]byte("x"))
	c, _ := src.CreateCuckoo("c", CuckooConfig{Capacity: 100})
	c.Add([]byte("x"))
	n, _ := src.CreateCounting("n", BloomConfig{Capacity: 100})
	n.Add([]byte("x"))
	m, _ := src.CreateBitmap("m", 100)
	m.Set(3)
	bs, cs, ns, ms := exportOf(t, b), exportOf(t, c), exportOf(t, n), exportOf(t, m)

	dir := t.TempDir()
	dst := mustOpen(t, dir, nil)
	defer dst.Close()
	list0, _ := dst.List()
	files0 := filterFiles(t, dir)
	cases := map[string][]byte{
		"bloom rate NaN":        restream(t, bs, func(m *format.FilterMeta) { m.ErrorRate = math.NaN() }),
		"bloom rate 2":          restream(t, bs, func(m *format.FilterMeta) { m.ErrorRate = 2 }),
		"bloom layer rate NaN":  restream(t, bs, func(m *format.FilterMeta) { m.Layers[0].ErrorRate = math.NaN() }),
		"bloom expansion 0":     restream(t, bs, func(m *format.FilterMeta) { m.Expansion = 0 }),
		"bloom expansion 1000":  restream(t, bs, func(m *format.FilterMeta) { m.Expansion = 1000 }),
		"bloom capacity 0":      restream(t, bs, func(m *format.FilterMeta) { m.Capacity = 0 }),
		"bloom items huge":      restream(t, bs, func(m *format.FilterMeta) { m.Layers[0].Items = math.MaxUint64 }),
		"bloom salt":            restream(t, bs, func(m *format.FilterMeta) { m.Layers[0].Salt ^= 1 }),
		"bloom derivation 7":    restream(t, bs, func(m *format.FilterMeta) { m.Layers[0].Derivation = 7 }),
		"bloom datapages+1":     restream(t, bs, func(m *format.FilterMeta) { m.Layers[0].DataPages++ }),
		"bloom stamp":           restream(t, bs, func(m *format.FilterMeta) { m.Layers[0].Stamp = 99 }),
		"bloom id":              restream(t, bs, func(m *format.FilterMeta) { m.ID = 99 }),
		"bloom synced":          restream(t, bs, func(m *format.FilterMeta) { m.SyncedLSN = 99 }),
		"bloom bits":            restream(t, bs, func(m *format.FilterMeta) { m.Bits = 99 }),
		"bloom bucketsize":      restream(t, bs, func(m *format.FilterMeta) { m.BucketSize = 4 }),
		"cuckoo bucket 0":       restream(t, cs, func(m *format.FilterMeta) { m.BucketSize = 0 }),
		"cuckoo bucket 17":      restream(t, cs, func(m *format.FilterMeta) { m.BucketSize = 17 }),
		"cuckoo fp 17":          restream(t, cs, func(m *format.FilterMeta) { m.FingerprintBits = 17 }),
		"cuckoo fp 2":           restream(t, cs, func(m *format.FilterMeta) { m.FingerprintBits = 2 }),
		"cuckoo maxiter 0":      restream(t, cs, func(m *format.FilterMeta) { m.MaxIterations = 0 }),
		"cuckoo expansion 1000": restream(t, cs, func(m *format.FilterMeta) { m.Expansion = 1000 }),
		"cuckoo items > slots":  restream(t, cs, func(m *format.FilterMeta) { m.Layers[0].Items = 1 << 40 }),
		"cuckoo rate":           restream(t, cs, func(m *format.FilterMeta) { m.ErrorRate = 0.5 }),
		"cuckoo nonscaling 2 layers": restream(t, cs, func(m *format.FilterMeta) {
			m.NonScaling, m.Expansion = true, 0
			m.Layers = append(m.Layers, m.Layers[0])
		}),
		"counting 2 layers":   restream(t, ns, func(m *format.FilterMeta) { m.Layers = append(m.Layers, m.Layers[0]) }),
		"counting items huge": restream(t, ns, func(m *format.FilterMeta) { m.Layers[0].Items = math.MaxUint64 }),
		"counting rate NaN":   restream(t, ns, func(m *format.FilterMeta) { m.ErrorRate = math.NaN() }),
		"bitmap bits 0": restream(t, ms, func(m *format.FilterMeta) {
			m.Bits, m.Capacity = 0, 0
			m.Layers[0].Size, m.Layers[0].Capacity = 0, 0
		}),
		"bitmap items > bits": restream(t, ms, func(m *format.FilterMeta) { m.Layers[0].Items = 101 }),
		"bitmap no layers":    restream(t, ms, func(m *format.FilterMeta) { m.Layers = nil }),
		"kind 0":              restream(t, ms, func(m *format.FilterMeta) { m.Kind = 0 }),
		"kind 9":              restream(t, ms, func(m *format.FilterMeta) { m.Kind = 9 }),
		"state 7":             restream(t, ms, func(m *format.FilterMeta) { m.State = 7 }),
	}
	for name, s := range cases {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: Import panicked: %v", name, r)
				}
			}()
			err := dst.Import("new", bytes.NewReader(s))
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: %v, want ErrCorrupt", name, err)
				if err == nil {
					in, _ := dst.List()
					for _, i := range in {
						if i.Name == "new" {
							t.Logf("   imported: %+v", i)
						}
					}
					dst.Drop("new")
				}
			}
		}()
	}
	list, _ := dst.List()
	if !reflect.DeepEqual(list, list0) {
		t.Errorf("List changed: %+v", list)
	}
	if files := filterFiles(t, dir); !reflect.DeepEqual(files, files0) {
		t.Errorf("files left: %v", files)
	}
}
