// FAIRGATE_CORE_CHECK: an invariant the core relies on, checked where a broken one would
// otherwise pass silently. Internal to src/core.
//
// A failed check is a bug in fairgate, not bad input (bad input gets a status): it prints where
// and what, and aborts, as Abseil's CHECK does. The whole set of invariants is checked, without
// aborting, by AdmissionCore::CheckInvariants.
#ifndef FAIRGATE_CORE_CHECK_H_
#define FAIRGATE_CORE_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FAIRGATE_CORE_CHECK(condition, what)                                                       \
  do {                                                                                             \
    if (!(condition)) {                                                                            \
      std::fprintf(stderr, "%s:%d: fairgate core invariant broken: %s (%s)\n", __FILE__, __LINE__, \
                   what, #condition);                                                              \
      std::abort();                                                                                \
    }                                                                                              \
  } while (false)

#endif  // FAIRGATE_CORE_CHECK_H_
