// Must not compile: the core (fairgate::core) sees only its own public headers, not the stores'
// interface. CTest's Build.TheCoreCannotIncludeTheStores builds this and expects the include to
// fail.
#include "fairgate/store.h"
