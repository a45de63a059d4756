// Must not compile: the core (fairgate::core) cannot see the runtime's folder. CTest's
// Build.TheCoreCannotIncludeTheRuntime builds this and expects the include to fail.
#include "runtime/waiting.h"
