package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/regfile"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// Backup writes a copy of the live store to dir, which must not exist,
// that Open accepts and that holds the store as of one WAL position: every
// change acknowledged before Backup was called, and possibly later ones.
// Writers go on meanwhile; they wait only for Backup's checkpoint and for
// a short stop at the end (a WAL fdatasync and the catalog copy). No
// checkpoint records while a Backup runs: Checkpoint and Close wait for
// it, and periodic checkpoints are skipped. A Load that has not ended
// when Backup copies the catalog is incomplete in the copy.
//
// The copy is built in dir+".tmp" and renamed to dir once every file and
// directory in it is durable, so an interrupted Backup (an error, a
// crash) never leaves a dir that looks complete; a failed Backup removes
// what it wrote, and nothing else. Until the copy is whole, it holds a
// marker file, BACKUP-INCOMPLETE, made durable before anything else:
// Open refuses a directory holding it (ErrCorrupt), so a leftover
// dir+".tmp" renamed by hand does not open as a store. A leftover dir+".tmp" is refused
// (ErrExists): remove it. So is either path when another Backup, or
// another process, makes it while this one waits or copies: the rename
// into dir never replaces anything (renameat2 RENAME_NOREPLACE on Linux;
// elsewhere a check just before the rename).
// The copy carries the store's identity and opens like a store whose
// writer died: its recovery replays the copied WAL, and its checksums stay
// unknown until its first clean Close. Unlike a dead writer's files, its
// layers never show a cuckoo move under way (see evenSeq), so a read-only
// open of the copy answers misses at once. The copy is made to take the
// store's place (a restore, after which the engine replays its external
// records into it: ApplyExternal), not to live beside it: a copy opened
// as a second store with the same identity accepts the external records
// the first encodes after the copy, and applies them to whatever filters
// of its own have those filters' ids by then (a filter created in each
// after the copy gets the same id), and the first accepts the copy's.
//
// Backup fails with ErrExists if dir exists, ErrInvalid if it is inside
// the store's own directory (through a link or a bind mount too: the copy
// there would take a segment's or a layer file's name, and Open would
// refuse the store), ErrReadOnly in a read-only
// store, ErrClosed after Close and the store's failure once it failed.
func (s *Store) Backup(dir string) error {
	if err := s.nilErr(); err != nil {
		return err
	}
	if s.opts.ReadOnly {
		return fmt.Errorf("store: backup: %w", ErrReadOnly)
	}
	if s.opts.simulated {
		return fmt.Errorf("store: backup: %w: the store's files are simulated", ErrInvalid)
	}
	if dir == "" {
		return fmt.Errorf("store: backup: %w: the directory path is empty", ErrInvalid)
	}
	if s.closed.Load() {
		// Before any directory is made: a closed store's Backup
		// returned its checkpoint's error ("store: checkpoint: closed")
		// after making and removing DIR.tmp.
		return fmt.Errorf("store: backup: %w", ErrClosed)
	}
	dir = filepath.Clean(dir)
	tmp := dir + ".tmp"
	if err := s.outsideStore(dir); err != nil {
		return err
	}
	for _, d := range []string{dir, tmp} {
		if _, err := os.Lstat(d); err == nil {
			return fmt.Errorf("store: backup: %s: %w", d, ErrExists)
		} else if pathRefused(err) {
			return fmt.Errorf("store: backup: %.200q: %w: the system does not accept the path (too long, or a NUL byte)", d, ErrInvalid)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("store: backup: %w", err)
		}
	}
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	if h := s.hooks.backupLocked; h != nil {
		h()
	}
	// The checks above fail fast; while this call waited for ckptMu,
	// another Backup (or another process) may have made either path.
	// tmp is this call's only once its Mkdir succeeds: nothing it did
	// not make is removed on a failure.
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("store: backup: %s: %w", dir, ErrExists)
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("store: backup: %s: %w", tmp, ErrExists)
		}
		return fmt.Errorf("store: backup: %w", err)
	}
	b := &backup{s: s, tmp: tmp, copied: make(map[string]bool)}
	removeTmp := func() {
		if rerr := removeCopy(tmp, b.made); rerr != nil {
			s.opts.Logger.Error("backup: cannot remove the incomplete copy", "dir", tmp, "err", rerr)
		}
	}
	if err := s.checkpointHeld(ckptPlain); err != nil {
		removeTmp()
		return err
	}
	if err := b.run(); err != nil {
		removeTmp()
		return fmt.Errorf("store: backup to %s: %w", dir, err)
	}
	if err := renameNoReplace(tmp, dir); err != nil {
		removeTmp()
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("store: backup: %s: %w (made while the copy was built)", dir, ErrExists)
		}
		return fmt.Errorf("store: backup: %w", err)
	}
	if err := syncDirFn(filepath.Dir(dir)); err != nil {
		// The rename may not survive a crash: a failed Backup, which
		// removes what it wrote, so that it can be run again.
		if rerr := removeCopy(dir, b.made); rerr != nil {
			s.opts.Logger.Error("backup: cannot remove the copy whose rename did not sync", "dir", dir, "err", rerr)
		}
		return fmt.Errorf("store: backup: sync %s: %w", filepath.Dir(dir), err)
	}
	return nil
}

// outsideStore returns an error wrapping ErrInvalid if dir would be
// inside the store's own directory: a copy in wal/ or filters/ would take
// the name of a segment or a layer file, and one anywhere else in it is
// a directory of the store's that no Open expects. It compares files, not
// names, walking up from dir's parent (symbolic links resolved), with
// the store's directory and its wal/ and filters/, so a link or a bind
// mount of any of them leading into the store is found too. A parent that
// cannot be resolved is left to Backup's own calls to report.
func (s *Store) outsideStore(dir string) error {
	// The store's directories, each compared: walking up from a bind
	// mount of wal/ or filters/ passes through the mount point's parents,
	// never through the store's directory.
	var homes []os.FileInfo
	for _, d := range []string{s.dir, format.WALDir(s.dir), format.FiltersDir(s.dir)} {
		if fi, err := os.Stat(d); err == nil {
			homes = append(homes, fi)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	p, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return nil
	}
	for {
		if fi, err := os.Stat(p); err == nil && slices.ContainsFunc(homes, func(h os.FileInfo) bool { return os.SameFile(fi, h) }) {
			return fmt.Errorf("store: backup: %w: %s is inside the store's directory %s", ErrInvalid, dir, s.dir)
		}
		up := filepath.Dir(p)
		if up == p {
			return nil
		}
		p = up
	}
}

// backupPasses bounds step 1's passes over the layer files (see backup).
const backupPasses = 4

// backup is one Backup's copying, after its checkpoint (at LSN C), with
// ckptMu held throughout so that no later checkpoint records: the
// catalog keeps C and every filter's counts as of C, and no WAL segment
// is deleted.
//
// Order and why the copy is consistent:
//
//  1. Without the gate, every layer file of every filter is copied (read
//     through the page cache, which the mappings write). Writers go on.
//     A pass that found new files (filters or layers made meanwhile) is
//     followed by another, at most backupPasses in all: step 2 copies
//     whatever is new by then, so a store that keeps making filters
//     lengthens the stop at the end instead of holding Backup, and with
//     it every Checkpoint and Close, for as long as it does.
//  2. With the gate held exclusively (no change in flight), the WAL is
//     synced, its segments and their written sizes noted (its end: LSN
//     E), the catalog copied (one bbolt read transaction), and any layer
//     created since step 1 copied.
//  3. Without the gate, each noted segment is copied up to its noted size.
//
// A cuckoo slot, counter or bitmap word is stored in a mapped file only
// after its record is in the WAL (durable or, under SyncInterval,
// fdatasynced first), so a word read in step 1 holds a value of LSN ≤ E,
// or its value at C if no record after C covers it. Recovery of the copy
// replays every record in (C, E] over these files, writing each covered
// word's after-image in LSN order: every word ends at its value at E, and
// an uncovered word was not changed after C. Bloom bits are set before
// their record is logged, so the copy may hold bits of adds after E:
// extra bits, as after a crash. The catalog copied at E names every filter
// and layer the records up to E touch (each is in the catalog before its
// first record), records of filters dropped before E are skipped by
// recovery as after a crash, and step 2 copies every layer the catalog
// names.
// backupMarker is in a Backup's copy until every file of it is in place
// (see backup.run); Open refuses a directory that holds it.
const backupMarker = "BACKUP-INCOMPLETE"

// refuseIncompleteBackup returns an error wrapping ErrCorrupt if dir
// holds backupMarker: it is the copy of a Backup that did not finish.
func refuseIncompleteBackup(dir string) error {
	if _, err := os.Lstat(filepath.Join(dir, backupMarker)); err == nil {
		return fmt.Errorf("store: open %s: %w: %s is there: the directory is the copy of a Backup that did not finish (a crash, or a failed Backup that could not remove it); remove the directory and run Backup again", dir, ErrCorrupt, backupMarker)
	}
	return nil
}

// removeCopy removes a Backup's copy dir, backupMarker last: a removal
// that fails part way (os.RemoveAll goes on past an entry it cannot
// remove, and would take the marker with the rest) leaves a directory
// that Open refuses. The marker is made first if it is not there (the
// copy was whole, its rename or the sync after it failed).
//
// made names the entries the Backup made in dir (relative to it, in the
// order it made them; the marker left out). They go first, newest first,
// by name: unlink and rmdir need no file descriptor, where making the
// marker, listing dir and os.RemoveAll each need one or two, and a
// Backup that failed for want of descriptors (EMFILE) cleans up while
// they are still short. Then the marker and dir go the same way. An
// empty dir (a Backup that failed before it made the marker: its
// checkpoint) is removed at once; it holds nothing Open could take for a
// store. Only where that leaves entries (ones the Backup did not make,
// or could not remove) does removeCopy list dir and remove what is
// there, as it did before. Before, a Backup that ran out of descriptors
// left DIR.tmp behind (empty, or holding the marker), and every later
// Backup to DIR failed with ErrExists until it was removed by hand.
func removeCopy(dir string, made []string) error {
	marker := filepath.Join(dir, backupMarker)
	if _, err := os.Lstat(marker); err != nil {
		if _, derr := os.Lstat(dir); errors.Is(derr, fs.ErrNotExist) {
			return nil
		}
		if err := os.Remove(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil // empty
		}
		// Nothing is removed unless the marker is there, durably: a
		// removal that then failed part way would leave a directory
		// Open takes for a store.
		f, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("making %s, before removing the copy: %w", backupMarker, err)
		}
		f.Close()
		if err := syncDirFn(dir); err != nil {
			return fmt.Errorf("making %s, before removing the copy: sync %s: %w", backupMarker, dir, err)
		}
	}
	if len(made) > 0 && removeMade(dir, made) == nil {
		// Every file of the copy is gone: without the marker, what may
		// stay (entries the Backup did not make) is no copy Open could
		// take for a store.
		if err := os.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.Remove(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return removeCopy(dir, nil)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	var first error
	for _, e := range ents {
		if e.Name() == backupMarker {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	return os.RemoveAll(dir)
}

// removeMade removes the entries of dir named in made (see removeCopy),
// newest first, each with one unlink or rmdir; one already gone is not an
// error. It stops at the first it cannot remove.
func removeMade(dir string, made []string) error {
	for i := len(made) - 1; i >= 0; i-- {
		if err := os.Remove(filepath.Join(dir, made[i])); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

type backup struct {
	s      *Store
	tmp    string
	copied map[string]bool // layer files copied, by source path
	// made names every entry of tmp the copy made or began to make
	// (relative to tmp, in order; the marker left out), for removeCopy.
	made []string
}

// making notes the entry of tmp at path, relative to it, in b.made,
// before the copy makes it, and returns path.
func (b *backup) making(path string) string {
	if rel, err := filepath.Rel(b.tmp, path); err == nil {
		b.made = append(b.made, rel)
	}
	return path
}

func (b *backup) run() error {
	s := b.s
	// The marker first, durable before any file of the copy: a copy a
	// crash (or an error whose cleanup failed) leaves, renamed into place
	// by hand, is refused by Open rather than taken for a store.
	marker := filepath.Join(b.tmp, backupMarker)
	mf, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if err := mf.Close(); err != nil {
		return err
	}
	if err := syncDirFn(b.tmp); err != nil {
		return fmt.Errorf("sync %s: %w", b.tmp, err)
	}
	for _, d := range []string{filepath.Join(b.tmp, format.FiltersName), filepath.Join(b.tmp, format.WALName)} {
		if err := os.Mkdir(b.making(d), 0o755); err != nil {
			return err
		}
	}
	// Step 1, repeated while filters or layers appear, a bounded number
	// of times.
	for pass, n := 0, -1; n != 0 && pass < backupPasses; pass++ {
		var err error
		if n, err = b.copyLayers(); err != nil {
			return err
		}
	}
	// Step 2.
	segs, err := func() ([]wal.Segment, error) {
		s.gate.Lock()
		defer s.gate.Unlock()
		if s.closed.Load() {
			return nil, ErrClosed
		}
		if err := s.failed(); err != nil {
			return nil, err
		}
		if err := s.log.Sync(); err != nil {
			return nil, s.fail(err)
		}
		if err := b.hook(s.cat.Path); err != nil {
			return nil, err
		}
		if err := s.cat.CopyFile(b.making(format.CatalogPath(b.tmp))); err != nil {
			return nil, err
		}
		// The checkpoint at the start deleted every entry of a filter
		// the store does not have (see checkpointLocked), but a create
		// or import whose commit landed although it reported ENOSPC may
		// have left one since: the copy keeps the filters the store has.
		s.mu.Lock()
		live := make(map[string]bool, len(s.filters))
		for name := range s.filters {
			live[name] = true
		}
		s.mu.Unlock()
		gone, err := catalog.New(b.tmp).Keep(live)
		if err != nil {
			return nil, err
		}
		for _, name := range gone {
			s.opts.Logger.Warn("backup: left out a catalog entry of a filter the store does not have (a create or import that reported a failure)", "filter", name)
		}
		if _, err := b.copyLayers(); err != nil {
			return nil, err
		}
		return s.log.Segments(), nil
	}()
	if err != nil {
		return err
	}
	// Step 3.
	walDir := filepath.Join(s.dir, format.WALName)
	for _, g := range segs {
		src := filepath.Join(walDir, g.Name)
		if err := b.hook(src); err != nil {
			return err
		}
		if err := copyFile(src, b.making(filepath.Join(b.tmp, format.WALName, g.Name)), g.Size, nil); err != nil {
			return err
		}
	}
	if err := b.prune(); err != nil {
		return err
	}
	// The copy's writer "died": its checksums are unknown (see
	// sessionFile), which they are, copied while writers changed pages.
	// The marker names the copy's newest segment, for its first Open's
	// check, and a session id, unlocked: a read-only Check of the copy
	// knows its writer dead and reports damage (deadwriter.go).
	f, err := os.OpenFile(b.making(filepath.Join(b.tmp, sessionFile)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if len(segs) > 0 { // a writer's WAL always has a segment
		_, err = f.Write(format.SessionContent(segs[len(segs)-1].FirstLSN, newSessionID()))
	}
	if err == nil {
		err = syncData(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("session marker: %w", err)
	}
	// Every file is in: the copy is whole once the syncs below make the
	// marker's removal durable (b.tmp's sync comes last).
	if err := os.Remove(marker); err != nil {
		return err
	}
	for _, d := range []string{filepath.Join(b.tmp, format.FiltersName), filepath.Join(b.tmp, format.WALName), b.tmp} {
		if err := syncDirFn(d); err != nil {
			return fmt.Errorf("sync %s: %w", d, err)
		}
	}
	return nil
}

// copyLayers copies every layer file of the live filters not copied yet
// and returns how many it copied. A missing file (a broken filter's) is
// skipped: the copy's filter is broken too.
func (b *backup) copyLayers() (int, error) {
	s := b.s
	s.mu.Lock()
	hs := make([]handle, 0, len(s.filters))
	for _, h := range s.filters {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	var paths []string
	for _, h := range hs {
		fb := h.base()
		fb.mu.Lock()
		for i := range fb.meta.Layers {
			if p := fb.path(i); !b.copied[p] {
				paths = append(paths, p)
			}
		}
		fb.mu.Unlock()
	}
	for _, p := range paths {
		if err := b.hook(p); err != nil {
			return 0, err
		}
		err := copyFile(p, b.making(filepath.Join(b.tmp, format.FiltersName, filepath.Base(p))), -1, evenSeq)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
		b.copied[p] = true
	}
	return len(paths), nil
}

// prune removes the copied layer files the copied catalog does not name
// (of filters dropped before it was copied), which the copy's Open would
// otherwise have to prove orphans.
func (b *backup) prune() error {
	st, err := catalog.New(b.tmp).Load()
	if err != nil {
		return err
	}
	named := make(map[string]bool)
	for _, m := range st.Filters {
		for i := range m.Layers {
			named[filepath.Base(format.LayerPath(b.tmp, m.ID, i))] = true
		}
	}
	fdir := filepath.Join(b.tmp, format.FiltersName)
	ents, err := os.ReadDir(fdir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !named[e.Name()] {
			if err := os.Remove(filepath.Join(fdir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *backup) hook(src string) error {
	if h := b.s.hooks.backupFile; h != nil {
		return h(src)
	}
	return nil
}

// evenSeq makes the move-sequence word of a copied layer file even. The
// copy may catch it odd, a cuckoo move under way in the live file, and
// in the copy no writer will ever end that move: a read-only open of the
// copy would take every miss in that layer for a lookup racing a move
// and answer "maybe" after retrying for 10 ms. The copy's words need no
// such guard: a move's record is in the WAL before its words change (and
// after the copy's checkpoint, since the move was under way after it),
// the WAL is copied after the layer files, and every open of the copy
// reads the words through that record's after-images, as a writer's
// recovery after a crash does.
func evenSeq(f *os.File) error {
	var b [8]byte
	if _, err := f.ReadAt(b[:], mmapbits.SeqOffset); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // a file too short to be a layer: the copy's Open reports it
		}
		return err
	}
	if seq := binary.NativeEndian.Uint64(b[:]); seq&1 != 0 {
		binary.NativeEndian.PutUint64(b[:], seq+1)
		_, err := f.WriteAt(b[:], mmapbits.SeqOffset)
		return err
	}
	return nil
}

// copyFile copies src to the new file dst, its first n bytes if n ≥ 0,
// lets fix change the copy, if fix is not nil, and fsyncs dst.
func copyFile(src, dst string, n int64, fix func(*os.File) error) (err error) {
	in, err := regfile.Open(src, os.O_RDONLY)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	if n < 0 {
		_, err = io.Copy(out, in)
	} else if _, err = io.CopyN(out, in, n); errors.Is(err, io.EOF) {
		err = fmt.Errorf("copy %s: shorter than the %d bytes written to it", src, n)
	}
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if fix != nil {
		if err := fix(out); err != nil {
			return fmt.Errorf("copy %s: %w", src, err)
		}
	}
	return out.Sync()
}
