module github.com/filterstore/filterstore/bench

go 1.26.8

replace github.com/filterstore/filterstore => ../

require (
	github.com/FastFilter/xorfilter v0.4.2-0.20260120015552-4e5a4d9df65a
	github.com/bits-and-blooms/bloom/v3 v3.7.1
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/filterstore/filterstore v0.0.0-00010101000000-000000000000
	github.com/greatroar/blobloom v0.8.0
	github.com/linvon/cuckoo-filter v0.4.0
	github.com/panmari/cuckoofilter v1.0.6
	github.com/seiflotfy/cuckoofilter v0.0.0-20240715131351-a2f2c23f1771
	golang.org/x/sys v0.49.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.2 // indirect
	github.com/dgryski/go-metro v0.0.0-20200812162917-85c65e2d0165 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	golang.org/x/exp v0.0.0-20260908205506-85c1c2202aba // indirect
)
