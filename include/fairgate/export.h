// fairgate/export.h: FAIRGATE_EXPORT, which marks what the shared libraries export.
//
// The shared libraries (BUILD_SHARED_LIBS) are built with hidden symbols by default: only the
// public API, each class and function of these headers marked FAIRGATE_EXPORT, is visible to a
// program that links them; fairgate's internals are not, and may change in any release. The
// static libraries export the same, and the mark changes nothing in a program that links them.
#ifndef FAIRGATE_EXPORT_H_
#define FAIRGATE_EXPORT_H_

#if defined(__GNUC__) || defined(__clang__)
#define FAIRGATE_EXPORT __attribute__((visibility("default")))
#else
#define FAIRGATE_EXPORT
#endif

#endif  // FAIRGATE_EXPORT_H_
