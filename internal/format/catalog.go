package format

// The buckets and keys of the bbolt catalog (drawn in the package
// documentation). They are part of the format and must never change;
// constants, so no one can change them at run time.
const (
	// BucketMeta holds the store-wide values under the Key* names.
	BucketMeta = "meta"
	// BucketFilters maps each filter name to its FilterMeta value.
	BucketFilters = "filters"

	// KeyFormat: u32 catalog format (CatalogFormat).
	KeyFormat = "format"
	// KeyStoreID: u64 the store's identity, never 0 (format 2).
	KeyStoreID = "storeid"
	// KeyCheckpoint: u64 LSN of the latest checkpoint.
	KeyCheckpoint = "checkpoint"
	// KeyExternal: u64, the highest external-log sequence number whose
	// batch the latest checkpoint covers (absent: 0).
	KeyExternal = "external"
	// KeyNextID: u64 the id the next created filter gets (ids are never
	// reused).
	KeyNextID = "nextid"
	// KeySum: u64, the catalog's content checksum (format 3): the XOR,
	// over every entry of every root bucket (this one left out), of
	// xxHash64 of the bucket's name, the key and the value, each preceded
	// by its length as a uvarint (package catalog, entrySum).
	KeySum = "sum"
)

// CatalogFormat is the catalog format this build writes. Format 2 added
// the store id and version 2 filter values; format 1 catalogs are read,
// and upgraded by the first writer Open. Format 3 added the content
// checksum (KeySum), which every commit stores and every read checks;
// format 2 catalogs are read, and upgraded by the first commit.
const CatalogFormat = 3
