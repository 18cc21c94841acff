package fserr

// filterstore builds for 64-bit platforms only (amd64, arm64, ppc64le,
// riscv64, s390x, ...): a filter's words are mapped from files of up to
// 2^44 bytes and indexed with int and uintptr, and file offsets, stamps
// and counts are 64-bit. Every filterstore package imports this one, so a
// build for a 32-bit platform (GOARCH=386, arm, mips, ...) stops at the
// next line, naming this file, instead of at an unrelated type mismatch
// deeper down. (Big-endian 64-bit hosts build, and refuse every mapping
// at run time: mmapbits' errBigEndian.)
const _ = uint(1 << 63) // filterstore needs a 64-bit platform: see the comment above
