module github.com/filterstore/filterstore/fusecrash

go 1.26.8

replace github.com/filterstore/filterstore => ../

require (
	github.com/filterstore/filterstore v0.0.0-00010101000000-000000000000
	github.com/hanwen/go-fuse/v2 v2.12.1
	golang.org/x/sys v0.49.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	golang.org/x/exp v0.0.0-20260908205506-85c1c2202aba // indirect
)
