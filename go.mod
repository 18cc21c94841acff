module github.com/filterstore/filterstore

go 1.26.8

require (
	github.com/cespare/xxhash/v2 v2.3.0
	go.etcd.io/bbolt v1.5.0
	golang.org/x/exp v0.0.0-20260908205506-85c1c2202aba
	golang.org/x/sys v0.49.0
)
